"""Filter workers are long-lived processes; one that hangs or dies is replaced and its problem recorded."""

from __future__ import annotations

import pytest

from cuda_agent.synth.filters import FilterConfig, FilterResult
from cuda_agent.synth.pool import FilterPool, FilterWorker

from .test_filters import TEMPLATE


@pytest.mark.slow
def test_worker_survives_hangs_and_crashes_of_problems() -> None:
    worker = FilterWorker(FilterConfig(timeout_s=8, compile=False, min_ms=0.0, max_ms=1e6))
    try:
        hang = worker.check(1, TEMPLATE.format(body="__import__('time').sleep(60)"))
        assert hang.reason == "timeout"
        crash = worker.check(2, TEMPLATE.format(body="__import__('os')._exit(3)"))
        assert crash.reason == "crash" and "3" in crash.detail
        # Problem code runs in the worker and may print anything: a printed result is not one (worker.py).
        forged = "@@synth-result@@ " + FilterResult(index=5, passed=True).model_dump_json()
        printed = worker.check(5, TEMPLATE.format(body=f"print({forged!r}, flush=True) or __import__('os')._exit(3)"))
        assert printed.reason == "crash" and not printed.passed
        good = worker.check(3, TEMPLATE.format(body="x * self.w"))
        again = worker.check(4, TEMPLATE.format(body="torch.tanh(x)"))
        assert good.passed and again.passed and worker.handled == 2  # one process served both
    finally:
        worker.stop()


def test_pool_stops_early_when_told() -> None:
    seen = []
    config = FilterConfig(compile=False, min_ms=0.0, max_ms=1e6)
    with FilterPool(config, workers=1) as pool:
        items = ((i, TEMPLATE.format(body="x * 2.0")) for i in range(50))
        pool.map(items, lambda r: seen.append(r.index) or len(seen) < 3)
    assert 3 <= len(seen) <= 4


@pytest.mark.slow
def test_compile_filter_runs_in_the_worker() -> None:
    worker = FilterWorker(FilterConfig(min_ms=0.0, max_ms=1e6))  # a cold torch.compile: ~20 s on a 2-core CPU
    try:
        result = worker.check(1, TEMPLATE.format(body="torch.relu(x) * self.w"))
    finally:
        worker.stop()
    assert result.passed and result.checks["runs_compile"] and result.compile_matches


def test_a_worker_that_cannot_start_is_an_error_not_a_problem_verdict(tmp_path) -> None:
    import torch

    from cuda_agent.synth.pool import WorkerStartError

    if torch.cuda.is_available():
        pytest.skip("needs a machine without CUDA, where a CUDA worker fails to set up")
    log = (tmp_path / "workers.log").open("a")
    worker = FilterWorker(FilterConfig(device="cuda", compile=False), log)
    with pytest.raises(WorkerStartError, match="exited with"):
        worker.check(1, TEMPLATE.format(body="x * 2.0"))
    assert worker.process is None


@pytest.mark.slow
def test_waiting_for_another_workers_gpu_turn_does_not_count_against_the_time_limit(tmp_path) -> None:
    import threading

    # Two workers sharing turns (the lock files work on any device): the slow one's 6 s runs hold the timer
    # of the quick one, whose own work takes well under its 3 s limit.
    slow = FilterWorker(FilterConfig(turns_dir=str(tmp_path), timeout_s=60, compile=False, max_ms=1e6))
    quick = FilterWorker(FilterConfig(turns_dir=str(tmp_path), timeout_s=3, compile=False, min_ms=0.0, max_ms=1e6))
    try:
        slow.start()
        quick.start()
        held = threading.Thread(target=slow.check, args=(1, TEMPLATE.format(body="__import__('time').sleep(6) or x")))
        held.start()
        __import__("time").sleep(1.5)  # the slow one is in its first run
        result = quick.check(2, TEMPLATE.format(body="x * self.w"))
        held.join()
    finally:
        slow.stop()
        quick.stop()
    assert result.passed, result
    assert result.turn_wait_s is not None and result.turn_wait_s > 3  # it did wait past its limit, and got through


def test_a_problem_past_the_memory_cap_is_out_of_memory_in_its_worker_not_the_machines() -> None:
    """Issue 41: a row broadcasting to 1000x1000x1024 took 22 of the machine's 23 GB and the kernel killed its
    worker, recorded as the row's crash. Workers now map at most their share of `tasks show --inspect`'s cap: the
    allocation fails inside the worker (out_of_memory, run again alone by the audit) and the worker goes on."""
    gib = 2**30
    config = FilterConfig(timeout_s=60, compile=False, min_ms=0.0, max_ms=1e6, memory_cap_bytes=6 * gib)
    worker = FilterWorker(config)
    try:
        # 8 GiB mapped, never touched: the machine would give it (no RAM is used), the worker's 6 GiB cap does not
        huge = worker.check(1, TEMPLATE.format(body="x + torch.empty(8 * 2**30 // 4)[:64]"))
        assert huge.reason == "out_of_memory" and not huge.passed, huge
        assert worker.check(2, TEMPLATE.format(body="x * self.w")).passed  # the same process, still serving
    finally:
        worker.stop()


def test_a_worker_killed_beside_others_is_memory_to_run_again_alone_and_alone_a_crash() -> None:
    config = FilterConfig(timeout_s=60, compile=False, min_ms=0.0, max_ms=1e6)
    kill = TEMPLATE.format(body="__import__('os').kill(__import__('os').getpid(), 9)")
    for shared, reason in ((True, "out_of_memory"), (False, "crash")):
        worker = FilterWorker(config, shared=shared)
        try:
            assert worker.check(1, kill).reason == reason
        finally:
            worker.stop()


def test_the_pool_shares_the_inspection_cap_among_its_cpu_workers() -> None:
    from cuda_agent.tasks.inspection import machine_memory

    pool = FilterPool(FilterConfig(device="cpu"), workers=2)
    cap = pool.config.memory_cap_bytes
    assert cap is not None and abs(cap - machine_memory().cap // 2) < 2**30  # free memory moves a little meanwhile
    assert all(w.config.memory_cap_bytes == cap and w.shared for w in pool.all)
    assert FilterPool(FilterConfig(device="cuda", turns_dir="t"), workers=2).config.memory_cap_bytes is None
