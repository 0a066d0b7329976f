"""The local pool's contract: one result per job, output capping, cancellation, back-pressure, timing exclusivity."""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from cuda_agent.errors import ConfigError, TaskError
from cuda_agent.sandbox.jobs import CommandJob, make_judge_job
from cuda_agent.sandbox.local import LocalPool, PoolFullError
from tests.sandbox.helpers import FAST, RELU, good_job


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    tmp_path.chmod(0o755)
    return tmp_path


def test_command_reports_exit_code_output_and_time(folder: Path) -> None:
    with LocalPool(build_workers=1) as pool:
        result = pool.run(CommandJob(argv=["bash", "-c", "echo out; echo err >&2; exit 3"], cwd=str(folder)))
    assert (result.status, result.kind) == ("done", "command")
    assert (result.command.exit_code, result.command.stdout, result.command.stderr) == (3, "out\n", "err\n")
    assert 0 < result.command.wall_s < 10 and not result.command.timed_out


def test_long_output_is_trimmed_to_head_and_tail(folder: Path) -> None:
    job = CommandJob(argv=["python", "-c", "print('a' * 100000 + 'END')"], cwd=str(folder), output_cap=1000)
    with LocalPool(build_workers=1) as pool:
        out = pool.run(job).command.stdout
    assert len(out) < 1100 and out.startswith("aaa") and out.rstrip().endswith("END") and "characters cut" in out


def test_command_killed_at_time_limit(folder: Path) -> None:
    with LocalPool(build_workers=1) as pool:
        start = time.monotonic()
        result = pool.run(CommandJob(argv=["sleep", "60"], cwd=str(folder), timeout_s=1.5))
    assert result.command.timed_out and result.command.exit_code is None
    assert time.monotonic() - start < 10


def test_cancel_running_and_waiting_jobs(folder: Path) -> None:
    with LocalPool(build_workers=1) as pool:
        running, waiting = (CommandJob(argv=["sleep", "60"], cwd=str(folder)) for _ in range(2))
        futures = [pool.submit(running), pool.submit(waiting)]
        time.sleep(1.0)
        assert pool.cancel(running.id) and pool.cancel(waiting.id)
        assert [f.result(timeout=20).status for f in futures] == ["cancelled", "cancelled"]
        assert pool.metrics().by_status == {"cancelled": 2}
        assert not pool.cancel(running.id)  # answered: nothing left to cancel


def test_full_queue_raises_and_duplicate_id_is_refused(folder: Path) -> None:
    with LocalPool(build_workers=1, max_pending=2) as pool:
        first = CommandJob(argv=["sleep", "60"], cwd=str(folder))
        pool.submit(first)
        time.sleep(0.5)  # the first has started; two may wait
        pool.submit(CommandJob(argv=["true"], cwd=str(folder)))
        pool.submit(CommandJob(argv=["true"], cwd=str(folder)))
        with pytest.raises(PoolFullError, match="queue is full"):
            pool.submit(CommandJob(argv=["true"], cwd=str(folder)))
        with pytest.raises(ConfigError, match="already in flight"):
            pool.submit(first)
        pool.cancel(first.id)


def test_timing_slot_is_never_shared(folder: Path) -> None:
    script = "import json, sys, time; s = time.time(); time.sleep(1); print(json.dumps([s, time.time()]))"
    with LocalPool(build_workers=2, gpus=[], cpu_timing_slots=1) as pool:
        futures = [
            pool.submit(CommandJob(argv=["python", "-c", script], cwd=str(folder), timing=True)) for _ in range(3)
        ]
        spans = sorted(json.loads(f.result().command.stdout) for f in futures)
    assert all(end <= next_start for (_, end), (next_start, _) in zip(spans, spans[1:], strict=False))


def test_every_job_is_answered_once_by_id(folder: Path) -> None:
    jobs = [CommandJob(argv=["bash", "-c", f"exit {i % 3}"], cwd=str(folder), timeout_s=10) for i in range(12)]
    with LocalPool(build_workers=2) as pool:
        futures = {job.id: pool.submit(job) for job in jobs}
        results = {job_id: f.result(timeout=60) for job_id, f in futures.items()}
        metrics = pool.metrics()
    assert all(r.job_id == job_id for job_id, r in results.items())
    assert [results[j.id].command.exit_code for j in jobs] == [i % 3 for i in range(12)]
    assert (metrics.submitted, metrics.completed, metrics.queue_depth, metrics.running) == (12, 12, 0, 0)


def test_judge_jobs_split_build_and_timing(folder: Path, tmp_path: Path) -> None:
    broken = RELU.replace("dst[i] = v < 0.0f ? 0.0f : v;", "dst[i] = undeclared_name;")
    with LocalPool(build_workers=2, gpus=[], cpu_timing_slots=1) as pool:
        good, bad = (
            pool.submit(good_job()),
            pool.submit(make_judge_job(task="examples/relu", solution=broken, config=FAST)),
        )
        gone = tmp_path / "gone"
        gone.mkdir()
        missing = pool.submit(make_judge_job(task="examples/relu", solution=gone, config=FAST))
        gone.rmdir()  # a workspace removed before its job ran: the judge's SolutionError, ours to report
        good, bad, missing = good.result(), bad.result(), missing.result()
        metrics = pool.metrics()
    assert good.verdict.verdict == "pass" and good.worker.startswith("build")  # untimed CPU job: no timing slot
    assert bad.verdict.verdict == "compile_error" and "undeclared_name" in bad.verdict.compile_log
    assert missing.status == "failed" and missing.error_type == "SolutionError", missing.error
    assert metrics.by_verdict == {"pass": 1, "compile_error": 1} and metrics.by_status == {"done": 2, "failed": 1}
    assert metrics.by_error == {"SolutionError": 1}
    with pytest.raises(TaskError, match="no task"):  # a reference that names no task is refused before a job
        make_judge_job("examples/no_such_task", RELU, FAST)


@pytest.mark.slow
def test_judge_job_pinned_to_a_timing_slot_runs_there() -> None:
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        make_judge_job(task="examples/relu", solution=RELU, gpu=-1)
    with LocalPool(build_workers=2, gpus=[], cpu_timing_slots=2) as pool:
        with pytest.raises(ConfigError, match="asks for GPU 2, but this pool times only on \\[0, 1\\]"):
            pool.submit(good_job().model_copy(update={"gpu": 2}))
        # Untimed CPU jobs would end on a build worker; pinned, they take their slot (as on a GPU).
        pinned = [pool.submit(good_job().model_copy(update={"gpu": gpu})) for gpu in (1, 0)]
        results = [future.result(timeout=120) for future in pinned]
    assert [(r.worker, r.verdict.verdict) for r in results] == [("timing-1", "pass"), ("timing-0", "pass")]


def test_cpu_plan_keeps_cores_for_timing_only_where_builds_keep_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    from cuda_agent.sandbox import cpu_sets

    monkeypatch.setattr(cpu_sets.os, "sched_getaffinity", lambda pid: set(range(16)))
    plan = cpu_sets.plan_cpu_sets(n_timing=2)
    assert plan.build == list(range(12)) and plan.timing == [[12, 13], [14, 15]] and not plan.note
    assert plan.as_metrics() == {"build": list(range(12)), "timing-0": [12, 13], "timing-1": [14, 15]}
    assert cpu_sets.plan_cpu_sets(n_timing=8).build == []  # builds would keep none: not pinned
    assert "too few" in cpu_sets.plan_cpu_sets(n_timing=8).note
    assert cpu_sets.plan_cpu_sets(n_timing=7, pin=True).build == [0, 1]
    assert cpu_sets.plan_cpu_sets(n_timing=1, pin=False).as_metrics() == {}
    monkeypatch.setattr(cpu_sets.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert cpu_sets.plan_cpu_sets(n_timing=1).build == [0, 1]  # half the cores stay with the builds
    assert cpu_sets.plan_cpu_sets(n_timing=1, cores_per_timing=3).build == []


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to keep one for timing")
def test_timing_and_build_stages_run_on_their_own_cores(folder: Path) -> None:
    cores = sorted(os.sched_getaffinity(0))
    show = ["python", "-c", "import os; print(sorted(os.sched_getaffinity(0)))"]
    with LocalPool(build_workers=1, pin_cpus=True, cores_per_timing=1) as pool:
        timed = pool.run(CommandJob(argv=show, cwd=str(folder), timing=True))
        built = pool.run(CommandJob(argv=show, cwd=str(folder)))
        metrics = pool.metrics()
    assert json.loads(timed.command.stdout) == [cores[-1]] and timed.hardening["cpus"] == [cores[-1]]
    assert json.loads(built.command.stdout) == cores[:-1]
    assert metrics.cpus == {"build": cores[:-1], "timing-0": [cores[-1]]}


def test_a_repeated_candidate_is_answered_from_the_verdict_cache_without_a_timing_slot() -> None:
    # A target_phase_s no earlier run used: a verdict key of its own, while relu's cached baseline still serves.
    config = {"trials": 2, "robustness_trials": False, "min_reps": 3, "max_reps": 5, "warmup_reps": 1}
    config["target_phase_s"] = 0.01 + random.random() * 1e-6
    with LocalPool(build_workers=1, gpus=[], cpu_timing_slots=1) as pool:
        first = pool.run(make_judge_job(task="examples/relu", solution=RELU, config=config))
        again = pool.run(make_judge_job(task="examples/relu", solution=RELU, config=config))
    assert first.verdict.verdict == "pass" and first.worker == "timing-0", first.error
    assert first.verdict.env["verdict_cached"] is False and first.verdict.timings_ms.solution > 0
    assert again.verdict.env["verdict_cached"] is True and again.worker.startswith("build-")
    assert again.verdict.timings_ms == first.verdict.timings_ms  # the first measurement, said to be cached
