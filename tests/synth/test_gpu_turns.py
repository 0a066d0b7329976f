"""Filter workers sharing a GPU: runs overlap, a timing runs alone, and a waiting timer goes before new runs."""

from __future__ import annotations

import multiprocessing
import threading
import time
from pathlib import Path

from cuda_agent.gpu_turns import GpuTurns
from cuda_agent.synth.filters import FilterConfig
from cuda_agent.synth.pool import FilterPool


def _hold(turns: GpuTurns, kind: str, seconds: float, log: list, name: str) -> None:
    with getattr(turns, kind)():
        log.append((name, "in", time.monotonic()))
        time.sleep(seconds)
        log.append((name, "out", time.monotonic()))


def _start(*args) -> threading.Thread:
    thread = threading.Thread(target=_hold, args=args)
    thread.start()
    return thread


def test_runs_overlap_a_timer_waits_for_them_and_goes_before_later_runs(tmp_path: Path) -> None:
    # flock locks belong to open files, so threads that open the lock files apart exclude each other as processes do
    turns, log = GpuTurns(tmp_path), []
    runs = [_start(turns, "shared", 0.6, log, f"run{i}") for i in range(2)]
    time.sleep(0.2)
    timer_turns = GpuTurns(tmp_path)
    timer = _start(timer_turns, "exclusive", 0.4, log, "timer")
    time.sleep(0.2)
    late_turns = GpuTurns(tmp_path)
    late = _start(late_turns, "shared", 0.1, log, "late")
    for thread in [*runs, timer, late]:
        thread.join(timeout=10)
    at = {(name, edge): t for name, edge, t in log}
    assert at["run1", "in"] < at["run0", "out"]  # the two runs shared the GPU
    assert at["timer", "in"] >= max(at["run0", "out"], at["run1", "out"])  # the timer waited for both
    assert at["late", "in"] >= at["timer", "out"]  # a run that came while the timer waited went after it
    # What each waited is counted (it goes into FilterResult.turn_wait_s): the timer ~0.4 s, the late run ~0.6 s.
    assert 0.25 < timer_turns.waited_s < 2 and 0.45 < late_turns.waited_s < 3 and turns.waited_s < 0.3


def _hold_forever(folder: str) -> None:
    with GpuTurns(folder).exclusive():
        time.sleep(600)


def test_a_killed_timer_releases_the_gpu(tmp_path: Path) -> None:
    holder = multiprocessing.get_context("fork").Process(target=_hold_forever, args=(str(tmp_path),))
    holder.start()
    time.sleep(0.5)
    log: list = []
    waiting = _start(GpuTurns(tmp_path), "shared", 0.0, log, "run")
    time.sleep(0.3)
    assert log == []  # held by the timer
    holder.kill()
    waiting.join(timeout=10)
    assert [edge for _, edge, _ in log] == ["in", "out"]


def test_pool_gives_gpu_workers_the_gpus_own_lock_folder(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1234")
    pool = FilterPool(FilterConfig(device="cuda"), workers=2)
    folder = pool.turns_dir
    assert folder == str(tmp_path / "gpu-turns" / "GPU-1234")  # the one judgements of that GPU take turns in
    assert {w.config.turns_dir for w in pool.all} == {folder}
    pool.close()
    assert FilterPool(FilterConfig(device="cpu"), workers=2).turns_dir is None
