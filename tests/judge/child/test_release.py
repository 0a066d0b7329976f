"""The control block of calls released one at a time (child/release.py): each side waits for the other's count,
spinning or asleep on a futex, and the grader finds where the shim said a call's outputs lie."""

from __future__ import annotations

import mmap
import os
import time

import torch

from cuda_agent.judge.child.release import GRADER_ASLEEP, RETURNED, Control, block_bytes
from cuda_agent.judge.protocol import OutputShape

SHAPES = [OutputShape(shape=(3, 2), dtype="float32"), OutputShape(shape=(), dtype="float32")]


def test_each_side_waits_for_the_others_count_and_the_grader_finds_the_outputs_places() -> None:
    region = mmap.mmap(-1, block_bytes(SHAPES))  # shared with the child forked below, as a memfd's mapping is
    outputs = [torch.zeros(2, 3).t(), torch.zeros(())]
    child = os.fork()
    if child == 0:  # the shim's side: two calls returned, each waiting for its release (asleep on the first)
        control = Control(region)
        for count in (1, 2):
            control.call_returned(outputs, count)
        os._exit(0)
    control = Control(region)
    for count, spin_s in ((1, 0.0), (2, 1.0)):  # asleep on the futex, then spinning
        assert control.wait(RETURNED, count, spin_s, GRADER_ASLEEP, lambda: False)
        assert control.places(SHAPES) == [(v.data_ptr(), tuple(v.stride())) for v in outputs]
        time.sleep(0.02)  # the child spins, then sleeps on our count: woken by the release
        control.release(count)
    deadline = time.monotonic() + 10
    while (done := os.waitpid(child, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert done[0] == child and os.waitstatus_to_exitcode(done[1]) == 0, done


def test_the_graders_wait_gives_up_when_told() -> None:
    control = Control(mmap.mmap(-1, block_bytes(SHAPES)))
    start = time.perf_counter()
    assert not control.returned(1, lambda: True)  # the candidate's process answered instead of returning a call
    assert time.perf_counter() - start < 0.5
