"""Which times decide the reward: whole calls, or kernel times where a whole call is mostly overhead; and the
verdict's timings (`verdict_timings`) with the intervals the reward decides on.

A whole call (child/timing.py) holds launches, a device-wide synchronisation and the extension call's own cost; for
a small task those are the time, and a kernel twice as fast as eager's measures slower (CA's axpby on an H100:
kernel durations 1.17 us against eager's 2.26, whole calls 58.1 us against 34.8). Kernel times
(child/kernel_time.py) are the paper's basis. They decide where:
- eager's kernel time is below `OVERHEAD_DOMINATED` of its whole call (what a whole call measures there is overhead),
- and the candidate's, eager's and (where it has one) torch.compile's kernel times were all measured,
- and the wall check holds: the candidate's whole call is at most `WALL_ALLOWANCE` times eager's, so work moved onto
  the host (outside any kernel, so outside kernel time) is still seen once it costs more than an extension call's
  own overhead; beyond it the whole calls decide.

What this does not protect against: host work cheaper than that allowance (tens of microseconds on a GPU) is not
seen on the kernel basis; at sizes where host work is that cheap, the data it needs crosses to the host by copies,
which are device events and so in the kernel time. The candidate's kernel time is its process's profiler reading
(kernel_time.py says what that does not protect against).
"""

from __future__ import annotations

from typing import Any, Literal

from cuda_agent.judge.child.timing import decision_interval
from cuda_agent.judge.protocol import BaselineResult, RunResult
from cuda_agent.types import KernelTimings, Timings

OVERHEAD_DOMINATED = 0.5
"""Kernel times decide where eager's kernels take less than this share of its whole call."""
WALL_ALLOWANCE = 2.0
"""On the kernel basis, the candidate's whole call may take at most this many times eager's (its extension call's
own overhead: 58.1 us against 34.8 for CA's axpby on an H100); beyond it, the whole calls decide."""


def choose_basis(
    solution_ms: float | None,
    eager_ms: float | None,
    compile_ms: float | None,
    kernel: KernelTimings | None,
    allowed: bool = True,
) -> tuple[Literal["call", "kernel"], str]:
    """The basis the reward is decided on, and why (said in the verdict's env).

    Args:
        solution_ms, eager_ms, compile_ms: whole-call medians (ms; None where not measured).
        kernel: the kernel-time medians, or None where none were measured.
    """
    if kernel is None or kernel.solution is None or kernel.eager is None or solution_ms is None or not eager_ms:
        return "call", "no kernel times (the CPU has no kernel events, or the task was not timed)"
    if not allowed:
        return (
            "call",
            "whole calls: the kernel basis is off (JudgeConfig.kernel_basis; the candidate's kernel time is a claim)",
        )
    if compile_ms is not None and kernel.compile is None:
        return "call", "torch.compile's kernel time was not measured"
    share = kernel.eager / eager_ms
    if share >= OVERHEAD_DOMINATED:
        return "call", f"eager's kernels are {share:.0%} of its whole call: the whole calls measure the work"
    if solution_ms > WALL_ALLOWANCE * eager_ms:
        return "call", (
            f"the candidate's whole call ({solution_ms:.4g} ms) is over {WALL_ALLOWANCE:g}x eager's ({eager_ms:.4g} "
            "ms): work outside its kernels counts"
        )
    return "kernel", f"eager's kernels are {share:.0%} of its whole call: the rest is overhead, kernel times decide"


def verdict_timings(
    run: RunResult, base: BaselineResult | None, floor: float, env: dict[str, Any], kernel_basis: bool = False
) -> Timings:
    """The verdict's timings: whole-call and kernel medians, the intervals the reward decides on (widened to the
    device's noise `floor`), and the basis it decides on (said in `env["timing_basis"]`). Where the run timed eager
    again beside the candidate (`run.eager_now`), the cached baselines' whole calls are rescaled by the machine's
    drift since they were timed (`env["timing"]["drift"]`)."""
    eager, compiled = (base.eager, base.compile) if base else (None, None)
    if run.eager_now and eager:
        drift = run.eager_now["median_ms"] / eager["median_ms"]
        env.setdefault("timing", {}).update(eager_now=run.eager_now, drift=drift)
        eager, compiled = _rescaled(eager, drift), _rescaled(compiled, drift)
    kernels = [run.kernel_timing, (eager or {}).get("kernel"), (compiled or {}).get("kernel")]
    kernel = None
    if any(kernels):
        kernel = KernelTimings(
            solution=_median(kernels[0]),
            eager=_median(kernels[1]),
            compile=_median(kernels[2]),
            solution_ci=decision_interval(kernels[0], floor),
            eager_ci=decision_interval(kernels[1], floor),
            compile_ci=decision_interval(kernels[2], floor),
        )
    medians = [_median(run.timing), _median(eager), _median(compiled)]
    basis, why = choose_basis(*medians, kernel, allowed=kernel_basis)
    env["timing_basis"] = why
    return Timings(
        solution=medians[0],
        eager=medians[1],
        compile=medians[2],
        solution_ci=decision_interval(run.timing, floor),
        eager_ci=decision_interval(eager, floor),
        compile_ci=decision_interval(compiled, floor),
        kernel=kernel,
        basis=basis,
    )


def _rescaled(summary: dict[str, Any] | None, drift: float) -> dict[str, Any] | None:
    """A cached baseline's median and interval as the machine's speed now makes them (whole calls only: kernel
    durations do not wait on the host's load)."""
    if not summary:
        return summary
    scaled = summary | {"median_ms": summary["median_ms"] * drift}
    if "ci_ms" in summary:
        scaled["ci_ms"] = [t * drift for t in summary["ci_ms"]]
    return scaled


def _median(summary: dict[str, Any] | None) -> float | None:
    """A timed phase's median (ms), None where it was not timed."""
    return summary["median_ms"] if summary else None
