"""The slot queue: pinned items go only to their slot's worker, unpinned ones to any, oldest first."""

from __future__ import annotations

import threading

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


def test_two_workers_of_one_slot_take_different_items_at_once() -> None:
    q = SlotQueue()
    q.put("first", 0)
    q.put("second", 0)
    got: list = []
    workers = [threading.Thread(target=lambda: got.append(q.get(0))) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=5)
    assert sorted(got) == ["first", "second"]


def test_a_gpu_slot_runs_judges_per_gpu_stages_a_cpu_timing_slot_one() -> None:
    # The GPU turn keeps GPU stages apart; nothing but the slot keeps two CPU timings apart.
    from cuda_agent.sandbox.local import LocalPool

    with LocalPool(build_workers=1, gpus=[0], judges_per_gpu=2, pin_cpus=False) as pool:
        assert pool.metrics().workers["timing"] == 2
    with LocalPool(build_workers=1, gpus=[], judges_per_gpu=2, pin_cpus=False) as pool:
        assert pool.metrics().workers["timing"] == 1
