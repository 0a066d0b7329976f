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
