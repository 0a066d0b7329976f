"""Calls released one at a time (child/release.py): each side waits for the other's count, spinning or asleep on a
futex; the grader finds where the shim said a call's outputs lie, and an output changed after its release is seen."""

from __future__ import annotations

import mmap
import os
import time
from types import SimpleNamespace

import pytest
import torch

from cuda_agent.judge.child.outputs import Outputs
from cuda_agent.judge.child.release import GRADER_ASLEEP, RETURNED, Control, block_bytes
from cuda_agent.judge.child.stop import Stop
from cuda_agent.judge.protocol import CallAnswer, OutputPlace, OutputShape

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


def _two_calls(first: torch.Tensor, last: torch.Tensor) -> CallAnswer:
    places = [OutputPlace(address=v.data_ptr(), strides=v.stride()) for v in (first, last)]
    return CallAnswer(status="ok", ms=[0.0, 0.0], outputs=[[p] for p in places])


def test_an_output_changed_after_its_call_was_released_is_incorrect() -> None:
    # The first call's outputs are sampled where the control block says they lie as the second call is released,
    # and the request's final read must find the same there; the final answer's place for that call is not read.
    spec = [OutputShape(shape=(64, 32), dtype="float32")]
    first, last, elsewhere = torch.randn(64, 32).t().contiguous().t(), torch.randn(64, 32), torch.randn(64, 32)
    g = SimpleNamespace(channel=SimpleNamespace(sender=os.getpid()), trials=[])  # this process: the candidate's
    reader = Outputs(torch, "cpu")
    draw = torch.Generator().manual_seed(1)
    marked = reader.mark(os.getpid(), [(first.data_ptr(), first.stride())], spec, "timing", draw)
    got = reader.read(g, _two_calls(elsewhere, last), spec, "timing", [marked])
    assert torch.equal(got[0][0], first) and torch.equal(got[1][0], last)  # read where it said as it returned
    first.add_(1.0)  # written after it returned
    with pytest.raises(Stop) as ended:
        reader.read(g, _two_calls(first, last), spec, "timing", [marked])
    assert ended.value.result.status == "incorrect" and g.trials and not g.trials[-1]["ok"]
    with pytest.raises(Stop) as ended:  # a place no output has, as it returned
        reader.mark(os.getpid(), [(8, (1, 64))], spec, "timing", draw)
    assert ended.value.result.status == "runtime_error"
