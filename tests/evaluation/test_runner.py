"""The run's JSONL: what a crash leaves behind is read back, and a resumed run retries only our errors."""

from __future__ import annotations

from pathlib import Path

from cuda_agent.evaluation.records import TaskResult
from cuda_agent.evaluation.runner import ResultStore, finished


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
