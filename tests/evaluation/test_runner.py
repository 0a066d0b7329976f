"""The run's JSONL: what a crash leaves behind is read back, a resumed run retries only our errors, and an
error of ours is a counted row left out of the rates."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.evaluation.metrics import compute_metrics
from cuda_agent.evaluation.records import TaskResult
from cuda_agent.evaluation.runner import ResultStore, finished, judge_solutions
from cuda_agent.sandbox.local import LocalPool
from cuda_agent.types import Task
from tests.judge.helpers import EXAMPLES, example_solution, hungry_reference

RELU = example_solution("relu")


def test_store_survives_a_torn_line_and_keeps_the_latest_result(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results.jsonl")
    store.append(TaskResult(ref="a", name="a", status="error", error="sandbox died"))
    store.append(TaskResult(ref="b", name="b", status="missing"))
    store.append(TaskResult(ref="a", name="a", status="missing"))
    with store.path.open("a") as f:
        f.write('{"ref": "c", "name": "c", "sta')  # the write a crash cut short
    done = store.load()
    assert {ref: r.status for ref, r in done.items()} == {"a": "missing", "b": "missing"}


def test_resume_retries_errors_of_ours_only() -> None:
    done = {
        "a": TaskResult(ref="a", name="a", status="error", error="sandbox died"),
        "b": TaskResult(ref="b", name="b", status="missing"),
    }
    assert list(finished(done)) == ["b"]


@pytest.mark.integration
def test_a_failure_of_ours_is_an_error_row_left_out_of_the_rates(tmp_path: Path) -> None:
    tasks = [
        Task(ref="inline/relu", name="relu", source="inline", code=(EXAMPLES / "problems" / "relu.py").read_text()),
        Task(ref="inline/hungry", name="hungry", source="inline", code=hungry_reference()),
    ]
    for task in tasks:
        (tmp_path / f"{task.name}.py").write_text(RELU)
    store, config = ResultStore(tmp_path / "results.jsonl"), {"time": False, "trials": 2, "verdict_cache": False}
    with LocalPool(build_workers=2) as pool:
        judge_solutions(tasks, tmp_path, pool, config, store, lambda result: None)
    results = store.load()
    assert results["inline/relu"].verdict.verdict == "pass"
    hungry = results["inline/hungry"]
    assert (hungry.status, hungry.verdict) == ("error", None) and "can't allocate memory" in hungry.error
    metrics = compute_metrics(list(results.values())).overall
    assert (metrics.tasks, metrics.pass_rate, metrics.verdicts) == (1, 1.0, {"error": 1, "pass": 1})
    assert list(finished(results)) == ["inline/relu"]  # a resumed run judges the other again
