"""`synth audit` runs every filter on every row of a data set, appends as it goes and resumes after a kill."""

from __future__ import annotations

from pathlib import Path

from cuda_agent.synth.audit import audit, read_results, summarize
from cuda_agent.synth.filters import FilterConfig, FilterResult

from .test_filters import TEMPLATE


def test_audit_resumes_past_done_rows_and_a_line_cut_by_a_kill(tmp_path: Path) -> None:
    rows = [{"code": TEMPLATE.format(body=body)} for body in ("x * self.w", "torch.ones_like(x)", "torch.tanh(x)")]
    out = tmp_path / "audit.jsonl"
    done = FilterResult(index=0, passed=True, checks={"runs_eager": True}, detail="from an earlier run")
    out.write_text(done.model_dump_json() + "\n" + '{"index": 2, "passed": tr')  # killed while writing row 2
    assert [r.index for r in read_results(out)] == [0]

    config = FilterConfig(compile=False, min_ms=0.0, max_ms=1e6)
    results = audit(rows, [0, 1, 2], config, workers=1, results_path=out)

    by_index = {r.index: r for r in results}
    assert sorted(by_index) == [0, 1, 2] and len(results) == 3  # row 0 kept, not run again
    assert by_index[0].detail == "from an earlier run"
    assert by_index[1].reason == "input_dependent" and by_index[1].checks["time_window"]  # every filter ran
    assert by_index[2].passed
    assert all(line.startswith("{") and line.endswith("}") for line in out.read_text().splitlines())
    summary = summarize(results)
    assert (summary.rows, summary.passed_all, summary.passed["input_dependent"]) == (
        3,
        2,
        1,
    )  # row 0 recorded one check
    assert summary.outcomes == {"pass": 2, "input_dependent": 1}


OOM_THE_FIRST_TIME = """
import os
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x)


def get_inputs():
    marker = {marker!r}
    if not os.path.exists(marker):  # the first run anywhere: as if a neighbour held the memory
        open(marker, "w").close()
        raise RuntimeError("CUDA out of memory. Tried to allocate 1.00 GiB")
    return [torch.randn(16, 16)]


def get_init_inputs():
    return []
"""


def test_rows_that_ran_out_of_memory_run_again_alone(tmp_path: Path) -> None:
    rows = [
        {"code": OOM_THE_FIRST_TIME.format(marker=str(tmp_path / "ran"))},
        {"code": TEMPLATE.format(body="torch.tanh(x)")},
        {"code": TEMPLATE.format(body="x * 3")},
    ]
    out = tmp_path / "audit.jsonl"
    # Row 2 as an audit file without the out-of-memory reason holds a neighbour's OOM: a failed filter, the error in detail.
    legacy = FilterResult(index=2, reason="deterministic", checks={"runs_eager": True, "deterministic": False},
                          detail="deterministic: OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB")  # fmt: skip
    out.write_text(legacy.model_dump_json() + "\n")
    config = FilterConfig(compile=False, min_ms=0.0, max_ms=1e6)
    results = audit(rows, [0, 1, 2], config, workers=2, results_path=out)

    by_index = {r.index: r for r in results}
    assert len(results) == 3 and all(by_index[i].passed for i in range(3))
    lines = [FilterResult.model_validate_json(line) for line in out.read_text().splitlines()]
    assert [r.reason for r in lines if r.index == 0] == ["out_of_memory", None]  # then alone, and it ran
    assert len([r for r in lines if r.index == 2]) == 2  # the legacy line was run again
    assert summarize(results).outcomes == {"pass": 3}
