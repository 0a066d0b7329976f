"""The slot queue: pinned items go only to their slot's worker, unpinned ones to any, oldest first."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from cuda_agent.sandbox.jobs import CommandJob
from cuda_agent.sandbox.slots import SlotQueue


def test_pinned_items_go_only_to_their_slot_and_unpinned_to_any() -> None:
    q = SlotQueue()
    q.put("for-1", 1)
    q.put("any-a")
    q.put("for-0", 0)
    q.put("any-b")
    assert [q.get(0), q.get(0), q.get(0)] == ["any-a", "for-0", "any-b"]  # skips the item pinned to slot 1
    assert q.get(1) == "for-1" and len(q) == 0


def test_stop_drains_then_returns_none_and_wakes_waiting_workers() -> None:
    q = SlotQueue()
    q.put("left", 0)
    got: list = []
    waiter = threading.Thread(target=lambda: got.append(q.get(1)))
    waiter.start()
    q.stop()
    waiter.join(timeout=5)
    assert got == [None] and not waiter.is_alive()
    assert q.get(0) == "left" and q.get(0) is None  # queued before the stop: still handed out


def wait_for_waiters(q: SlotQueue, count: int) -> None:
    """Until `count` threads are blocked in `q.get` (the condition's waiters: CPython keeps them in `_waiters`)."""
    deadline = time.monotonic() + 5
    while len(q._cond._waiters) < count:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "the workers never blocked in get()"
        time.sleep(0.01)


def test_two_workers_of_one_slot_take_different_items_at_once() -> None:
    q = SlotQueue()
    together = threading.Barrier(2, timeout=5)  # both hold an item at the same time, or it breaks
    got: list = []

    def work() -> None:
        item = q.get(0)
        together.wait()
        got.append(item)

    workers = [threading.Thread(target=work) for _ in range(2)]
    for worker in workers:
        worker.start()
    wait_for_waiters(q, 2)  # both wait before anything is queued: each put must wake one of them
    q.put("first", 0)
    q.put("second", 0)
    for worker in workers:
        worker.join(timeout=10)
    assert sorted(got) == ["first", "second"] and not together.broken


def test_an_item_for_one_slot_wakes_that_slot_while_another_slot_waits_first() -> None:
    # Waking only one waiter (notify) would wake slot 0's, which finds nothing for it; slot 1 would sleep on.
    q = SlotQueue()
    got: dict[int, object] = {}
    waiters = [threading.Thread(target=lambda s=slot: got.setdefault(s, q.get(s))) for slot in (0, 1)]
    waiters[0].start()
    wait_for_waiters(q, 1)
    waiters[1].start()
    wait_for_waiters(q, 2)
    q.put("for-1", 1)
    waiters[1].join(timeout=5)
    assert got == {1: "for-1"}
    q.stop()
    waiters[0].join(timeout=5)
    assert got == {1: "for-1", 0: None}


RENDEZVOUS = """
import pathlib, sys, time
me, other = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
me.touch()
deadline = time.monotonic() + float(sys.argv[3])
while not other.exists() and time.monotonic() < deadline:
    time.sleep(0.05)
print("together" if other.exists() else "alone")
"""


def test_a_gpu_slot_runs_judges_per_gpu_stages_at_once_a_cpu_timing_slot_one(tmp_path: Path) -> None:
    # Each job waits for the other to start: together only if both run at once on the one slot. The GPU turn
    # keeps GPU stages apart; nothing but the slot keeps two CPU timings apart.
    from cuda_agent.sandbox.local import LocalPool

    def pair(pool: LocalPool, folder: Path, wait_s: float) -> list[str]:
        folder.mkdir()
        folder.chmod(0o777)  # as root the commands run as nobody
        argv = [
            [sys.executable, "-c", RENDEZVOUS, str(folder / a), str(folder / b), str(wait_s)] for a, b in ("ab", "ba")
        ]
        futures = [pool.submit(CommandJob(argv=a, cwd=str(folder), timing=True, timeout_s=60)) for a in argv]
        return [f.result(timeout=90).command.stdout.strip() for f in futures]

    with LocalPool(build_workers=1, gpus=[0], judges_per_gpu=2, pin_cpus=False) as pool:
        assert pool.metrics().workers["timing"] == 2
        assert pair(pool, tmp_path / "gpu", 30) == ["together", "together"]
    with LocalPool(build_workers=1, gpus=[], judges_per_gpu=2, pin_cpus=False) as pool:
        assert pool.metrics().workers["timing"] == 1
        assert pair(pool, tmp_path / "cpu", 2)[0] == "alone"  # the second starts only after the first gave up
