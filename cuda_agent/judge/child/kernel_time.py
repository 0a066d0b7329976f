"""Kernel time: the summed durations of the device's kernels inside one forward, the basis CUDA Agent's profiling
script and the paper time on, beside the whole call that timing.py times.

A whole call (an event before forward, a device-wide synchronisation and an event after, the cache flushed before)
holds the call's own overhead: launches, the synchronisation, the extension call. Below some size that overhead is
the time: on an H100, CA's 128-element axpby took 2.26 us (eager), 1.03 us (torch.compile) and 1.17 us (the kernel)
by kernel durations, and 34.8, 72.3 and 58.1 us as whole calls. The judge reports both, and the reward uses the
kernel basis where the whole call is mostly overhead (`basis.choose_basis`).

Read with torch's profiler (CUPTI on CUDA): every CUDA event of the profiled call (kernels, and the copies and
memsets a call makes) summed, each call profiled on its own. CUPTI sees only the process that launched the kernels,
so the candidate's kernel time is read in the candidate's process (shim.py's `profile`) and is its claim, which the
grader bounds (`bound_claim`): never above the call's own time. On the CPU there are no kernel events (a C++
extension's work shows as no profiler event at all), so kernel time is absent there.

What this does not protect against: a candidate that makes its process's profiler report less than its kernels
took (patching torch.profiler needs what the static policy refuses: private names, dynamic code, global state; a
way past it would make its kernel time a lie). It can only lower the kernel-basis time where that basis is used,
where eager is mostly overhead; the whole-call check (`basis.choose_basis`) still sees host work and slow calls.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable
from typing import Any

from cuda_agent.judge.child.timing import median_interval

KERNEL_REPS = 20
"""Calls profiled at most, each in a profiler session of its own (a session's start and stop cost milliseconds)..."""
KERNEL_MIN_REPS = 3
KERNEL_BUDGET_S = 1.0
"""...and at least KERNEL_MIN_REPS, then until this much time is spent: a slow call is profiled a few times only (the
grader's step limit allows a few calls of the candidate per step)."""


def summed_durations_us(events: Iterable[Any], device_type: Any) -> float:
    """The summed durations (us) of the profiler events on `device_type` (torch.autograd.DeviceType)."""
    return float(sum(e.time_range.elapsed_us() for e in events if e.device_type == device_type))


def kernel_times_ms(
    call: Callable[[], Any], device: str, sync: Callable[[], None], reps: int = KERNEL_REPS
) -> list[float] | None:
    """Each of `reps` calls' summed CUDA kernel durations, in ms; None on the CPU (no kernel events there).

    Args:
        call: runs forward once (its exceptions propagate).
        device: 'cuda' or 'cpu'.
        sync: waits for the device.
    """
    if device != "cuda":
        return None
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    call()  # the profiler's first session pays for CUPTI's set-up; the call before it for lazy work of forward's
    times: list[float] = []
    start = time.perf_counter()
    for _ in range(reps):
        if len(times) >= KERNEL_MIN_REPS and time.perf_counter() - start > KERNEL_BUDGET_S:
            break
        sync()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            call()
            sync()
        times.append(summed_durations_us(prof.events(), DeviceType.CUDA) / 1e3)
    return times


def kernel_summary(times_ms: list[float] | None) -> dict[str, Any] | None:
    """{median_ms, ci_ms, reps} of per-call kernel times (as timing.PhaseTiming.summary), None where absent."""
    if not times_ms:
        return None
    return {
        "median_ms": statistics.median(times_ms),
        "ci_ms": list(median_interval(times_ms)),
        "reps": len(times_ms),
    }


def bound_claim(claimed_ms: list[float] | None, call_median_ms: float | None) -> dict[str, Any] | None:
    """The candidate's kernel times as the grader takes them: each at most the whole call's median (kernels run
    inside the call; a larger claim is capped, not refused: it only makes the candidate slower)."""
    if not claimed_ms or call_median_ms is None:
        return None
    summary = kernel_summary([min(t, call_median_ms) for t in claimed_ms])
    assert summary is not None
    return summary | {"source": "profiler in the candidate's process, capped at the call's median"}
