"""Kernel times beside whole calls: what the profiler's events sum to, what the grader takes of a claim, and which
basis decides the reward."""

from __future__ import annotations

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from cuda_agent.judge.basis import OVERHEAD_DOMINATED, WALL_ALLOWANCE, choose_basis
from cuda_agent.judge.child.kernel_time import bound_claim, kernel_times_ms, summed_durations_us
from cuda_agent.reward import reward_of
from cuda_agent.types import KernelTimings, Timings


def test_summed_durations_are_the_events_of_the_device_asked_for() -> None:
    """Exercised with the profiler's CPU events (a CUDA run sums its kernel events the same way)."""
    x = torch.randn(256, 256)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.mm(x, x)
        torch.relu(x)
    events = prof.events()
    total = summed_durations_us(events, DeviceType.CPU)
    assert total == pytest.approx(sum(e.time_range.elapsed_us() for e in events if e.device_type == DeviceType.CPU))
    assert total >= max(e.time_range.elapsed_us() for e in events if e.name == "aten::mm") > 0
    assert summed_durations_us(events, DeviceType.CUDA) == 0.0


def test_the_cpu_has_no_kernel_times() -> None:
    assert kernel_times_ms(lambda: torch.relu(torch.randn(8)), "cpu", lambda: None) is None


def test_a_claim_is_capped_at_the_whole_call_and_summarised() -> None:
    taken = bound_claim([0.001, 0.002, 0.5, 0.0015, 0.0012, 0.0011, 0.0013], call_median_ms=0.05)
    assert taken["median_ms"] == pytest.approx(0.0013) and taken["reps"] == 7
    assert taken["ci_ms"][1] <= 0.05  # the 0.5 ms claim was capped at the call's median
    assert bound_claim(None, 0.05) is None and bound_claim([0.001], None) is None


AXPBY = KernelTimings(solution=0.00117, eager=0.00226, compile=0.00103)
"""CA's 128-element axpby on an H100 (issue 38): kernel durations from CA's profiling script."""


def test_kernel_times_decide_where_eagers_whole_call_is_mostly_overhead() -> None:
    basis, why = choose_basis(0.0581, 0.0348, 0.0723, AXPBY)  # whole calls as the judge timed them
    assert basis == "kernel" and "overhead" in why
    timings = Timings(solution=0.0581, eager=0.0348, compile=0.0723, kernel=AXPBY, basis=basis)
    assert reward_of("pass", timings) == 2  # 1.93x eager's kernels; torch.compile's are faster still
    assert reward_of("pass", timings.model_copy(update={"basis": "call"})) == 1  # 0.60x eager as whole calls


@pytest.mark.parametrize(
    ("solution_ms", "kernel", "reason"),
    [
        (0.0581, None, "no kernel times"),
        (0.0581, AXPBY.model_copy(update={"compile": None}), "torch.compile's kernel time"),
        (0.0581, AXPBY.model_copy(update={"eager": OVERHEAD_DOMINATED * 0.0348}), "of its whole call: the whole"),
        (WALL_ALLOWANCE * 0.0348 * 1.01, AXPBY, "work outside its kernels counts"),  # host work shows in the wall
    ],
    ids=["cpu", "no_compile_kernel_time", "eager_is_work", "wall_check"],
)
def test_whole_calls_decide_otherwise(solution_ms: float, kernel: KernelTimings | None, reason: str) -> None:
    basis, why = choose_basis(solution_ms, 0.0348, 0.0723, kernel)
    assert basis == "call" and reason in why
