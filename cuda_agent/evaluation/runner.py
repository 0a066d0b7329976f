"""Run a benchmark's tasks: judge a folder of solutions, or run the agent per task; one JSONL line per task.

Each task's result is appended to `results.jsonl` (and flushed) the moment it finishes, so a crash
or an interrupt loses nothing; a resumed run skips the tasks already there (a task that ended in
an error of ours is retried). Judgements go through the sandbox pool (isolation and exclusive
timing); episodes through `episodes.py`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from cuda_agent.errors import Error, InfraError, ModelError
from cuda_agent.evaluation.records import TaskResult
from cuda_agent.evaluation.suites import find_solution
from cuda_agent.sandbox.jobs import JobResult, JudgeJob, error_class, make_judge_job
from cuda_agent.types import Task, Verdict

Advance = Callable[[TaskResult], None]


class Pool(Protocol):
    """What the runner needs of a sandbox pool (LocalPool and RayPool both fit)."""

    def submit(self, job: JudgeJob) -> Future[JobResult]: ...

    def judge_workspace(self, task: Task, workspace: Path, config: dict[str, Any] | None = None) -> Verdict: ...


class ResultStore:
    """results.jsonl of a run: read what is done, append each result as it comes (thread-safe)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def load(self) -> dict[str, TaskResult]:
        """Results already written, by task ref (a later line for a ref wins; a torn last line is skipped)."""
        done: dict[str, TaskResult] = {}
        if not self.path.exists():
            return done
        for line in self.path.read_text().splitlines():
            try:
                result = TaskResult.model_validate_json(line)
            except ValueError:  # the line a crash cut short
                continue
            done[result.ref] = result
        return done

    def append(self, result: TaskResult) -> None:
        with self._lock, self.path.open("a") as f:
            f.write(result.model_dump_json() + "\n")
            f.flush()


def finished(done: dict[str, TaskResult]) -> dict[str, TaskResult]:
    """The results a resumed run keeps: everything but errors of ours, which are tried again."""
    return {ref: r for ref, r in done.items() if r.status != "error"}


def _base(task: Task, **fields: Any) -> TaskResult:
    return TaskResult(ref=task.ref, name=task.name, level=task.level, source=task.source, **fields)


def judge_result(task: Task, solution: Path, job_result: JobResult, wall_s: float) -> TaskResult:
    """A pool's answer as a task result: a verdict; an error of ours (an InfraError, or a cancelled job: status
    error, left out of the rates, retried on resume); or the input's fault (a SolutionError, TaskError, ...:
    status failed, counted as failed like a missing solution)."""
    if job_result.verdict is not None:
        return _base(task, status="judged", solution=str(solution), verdict=job_result.verdict, wall_s=wall_s)
    error = job_result.error or f"the sandbox job ended {job_result.status}"
    ours = job_result.status == "cancelled" or issubclass(error_class(job_result.error_type), InfraError)
    return _base(task, status="error" if ours else "failed", solution=str(solution), error=error, wall_s=wall_s)


def judge_solutions(
    tasks: list[Task],
    folder: Path,
    pool: Pool,
    judge_config: dict[str, Any],
    store: ResultStore,
    advance: Advance,
    window: int = 8,
) -> None:
    """Judge each task's solution in `folder` through `pool`; a task without one is stored as missing.

    At most `window` jobs are in the pool at once, so a long suite never fills its queue.
    """
    started: dict[Future[JobResult], tuple[Task, Path, float]] = {}
    queue = list(tasks)
    while queue or started:
        while queue and len(started) < window:
            task = queue.pop(0)
            solution = find_solution(task, folder)
            if solution is None:
                result = _base(task, status="missing", error=f"no solution for {task.ref} in {folder}")
                store.append(result)
                advance(result)
                continue
            job = make_judge_job(task, Path(solution), judge_config)
            started[pool.submit(job)] = (task, solution, time.monotonic())
        if not started:
            continue
        done, _ = wait(started, return_when=FIRST_COMPLETED)
        for future in done:
            task, solution, t0 = started.pop(future)
            result = judge_result(task, solution, future.result(), time.monotonic() - t0)
            store.append(result)
            advance(result)


def run_episodes(
    tasks: list[Task], solve: Callable[[Task], TaskResult], workers: int, store: ResultStore, advance: Advance
) -> None:
    """Run `solve` (one agent episode, scored) per task on `workers` threads; store each result as it ends."""
    with ThreadPoolExecutor(max_workers=workers) as executor:
        futures = {executor.submit(solve, task): task for task in tasks}
        for future in _as_done(futures):
            task = futures[future]
            try:
                result = future.result()
            except Exception as exc:  # one broken episode must not end the run; it is no verdict
                # The agent's input (no model_new.py, a kernel that is not text: SolutionError, ...) counts as failed,
                # as judge_result counts it; our failures (the judge, the sandbox, the model server) are errors of
                # ours, left out of the rates and tried again on resume.
                ours = not isinstance(exc, Error) or isinstance(exc, InfraError | ModelError)
                result = _base(task, status="error" if ours else "failed", error=f"{type(exc).__name__}: {exc}")
            store.append(result)
            advance(result)


def _as_done(futures: dict[Future, Task]) -> Iterator[Future]:
    pending = set(futures)
    while pending:
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        yield from done


@contextmanager
def progress_bar(total: int, description: str, enabled: bool = True) -> Iterator[Advance]:
    """A rich progress bar with elapsed time and an estimate of time left; yields the per-result callback."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[last]}"),
    )
    with Progress(*columns, disable=not enabled) as progress:
        bar = progress.add_task(description, total=total, last="")

        def advance(result: TaskResult) -> None:
            outcome = result.verdict.verdict if result.verdict else result.status
            progress.update(bar, advance=1, last=f"{result.ref}: {outcome}")

        yield advance
