"""The grader's own measures, taken in its process: what a request costs besides forward, before candidate code
(`calibrate`, which also chooses how many calls each request carries), and eager's time now (`time_reference`).

Functions of the grader's state (grader.py's `Grader`), as timed_calls.py's are.
"""

from __future__ import annotations

import math
import secrets
import statistics
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cuda_agent.judge.child.exchange import Channel
    from cuda_agent.judge.child.grader import Grader
    from cuda_agent.judge.standby import Standby

CALIBRATION_CALLS = 16
"""Requests of a model that returns zeros, before candidate code: what a request costs the grader besides forward
(after CALIBRATION_WARMUP more, which pay for first uses: the sampler, the copy, the allocator)."""
CALIBRATION_WARMUP = 3
REFERENCE_CALLS = 5
"""Calls of the reference timed before candidate code, for the number of calls per request (`calibrate`)."""
PAIRED_SHARE = 0.25
"""Eager's phase now (`time_reference`) spends this share of the candidate's phase target."""


def _seed() -> int:
    """As grader.fresh_seed: 63 bits from the OS's CSPRNG."""
    return secrets.randbits(63)


def calibrate(g: Grader) -> None:
    """What a request costs the grader besides forward (`timing.external_bound`), on the candidate's process before
    its code is loaded: a model that returns zeros, on inputs and outputs of the real size, each request after the
    cache flush that precedes every timed one. From single calls' overhead noise and eager's time, how many calls each
    request carries (`timing.group_size`; or the task's cached baselines' number, so that both are timed alike; one
    where the run is not timed), then the overhead of requests of that many calls."""
    from cuda_agent.judge.child.inputs import make_inputs
    from cuda_agent.judge.child.timing import group_size, make_flusher, overhead_noise

    start = time.perf_counter()
    inputs = make_inputs(g.problem, g.req.task_name, _seed(), g.device)
    g.flush = make_flusher(g.device, g.env.get("l2_bytes"), g.l2.reset if g.l2 else None)
    g.overhead_ms = overheads(g, inputs, 1)
    group = g.req.group_calls if g.req.time else 1  # untimed, a call per request: nothing to resolve
    if group is None:
        tensors = [v for v in inputs if isinstance(v, g.torch.Tensor)]
        nbytes = sum(v.numel() * v.element_size() for v in tensors)
        nbytes += sum(math.prod(shape) * dtype.itemsize for shape, dtype in g.output_specs)
        noise = overhead_noise(g.overhead_ms, g.device)
        eager_ms = reference_ms(g, inputs)
        outputs = len(g.output_specs)
        group = group_size(noise, eager_ms, nbytes, len(tensors), g.device, g.req.max_group_calls, outputs)
        g.env["group_chosen_from"] = {"noise_ms": noise, "eager_ms": eager_ms, "call_bytes": nbytes}
    g.group = group
    if g.gauge is not None:  # the gauge's requests between the candidate's: the drift's zero, at the same load
        g.overhead_ms = g.gauge.calibrate_beside(inputs)
    elif group > 1:
        g.overhead_ms = overheads(g, inputs, group)
    g.env["call_overhead_ms"] = statistics.median(g.overhead_ms)
    g.env["group_calls"] = group
    g.stage_s["calibration"] = time.perf_counter() - start


def overheads(g: Grader, inputs: list[Any], calls: int, beside: Grader | None = None) -> list[float]:
    """CALIBRATION_CALLS requests of `calls` calls of a model that returns zeros: each request's outside view less
    what the candidate's process reported (after CALIBRATION_WARMUP more). `beside`: another process of ours makes
    each request after `g`'s, at the same load; its overheads go to `beside.overhead_ms`."""
    warmup = CALIBRATION_WARMUP if calls == 1 or beside is not None else 1  # single calls paid for the first uses
    ours, theirs = [], []
    for _ in range(warmup + CALIBRATION_CALLS):
        theirs.append(probe(g, inputs, calls))
        if beside is not None:
            ours.append(probe(beside, inputs, calls))
    if beside is not None:
        beside.overhead_ms = ours[warmup:]
    return theirs[warmup:]


def probe(g: Grader, inputs: list[Any], calls: int) -> float:
    """One request of `calls` calls of the model that returns zeros, on `inputs` each: its outside view less what the
    process reported."""
    refs, _ = g.load_calls([inputs] * calls)  # as every timed request's: handed over with it on the CPU
    g.flush()  # as before every timed request: what its overhead costs from a cold cache
    answer, external_ms = g.call(refs, "calibration", probe=True)
    return max(0.0, external_ms - sum(answer.ms))


def probe_among_timed(g: Grader, inputs: list[Any]) -> float:
    """`probe` during the timed phase, with the candidate's code loaded (`timed_calls.TimedCalls`): the forward it runs
    is ours, and nothing it answers moves the persisting-L2 set-aside the grader holds its answers to (a probe's
    answer sets it before candidate code: `Grader.call`); a raised set-aside shows in the next timed answer."""
    held = g.shim_l2_bytes
    try:
        return probe(g, inputs, g.group)
    finally:
        g.shim_l2_bytes = held


def reference_ms(g: Grader, inputs: list[Any]) -> float:
    """Eager's time per call here, before candidate code (the median of REFERENCE_CALLS, each after the flush): what
    the outside view's resolution is aimed at (`timing.group_size`)."""
    times = []
    for _ in range(REFERENCE_CALLS):
        g.flush()
        g.sync()
        start = time.perf_counter()
        with g.torch.no_grad():
            g.reference(*inputs)
        g.sync()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def time_reference(g: Grader, started: tuple[Standby, Channel] | None = None) -> dict[str, Any]:
    """Eager's time now, by the candidate's protocol (`timed_calls.ReferenceCalls`: requests of as many calls, the
    same flush, calibration, probes and reading of the outside view, a shorter phase) through a shim process of ours
    (`started` ahead, or started now) that calls the reference: how much slower or faster the machine is than when
    the cached baselines were timed (the pipeline rescales them by it). Where the candidate had a gauge, the same
    process is this phase's gauge, calibrated beside it and sampled as it was beside the candidate (a gauge's request
    between two timed ones takes the other core's caches, and stops the timed process: both sides meet it alike).
    Timed while the candidate's processes are stopped (`gauge.held_still`); threads of theirs still running after its
    wait (a thread in a system call the kernel works on for it, which would make eager slower and the candidate
    faster): the candidate's `rejected`."""
    from cuda_agent.judge.child.gauge import Ours, held_still
    from cuda_agent.judge.child.inputs import make_inputs
    from cuda_agent.judge.child.timed_calls import ReferenceCalls

    start = time.perf_counter()
    # Its own process group, never the candidate's user: the gauge stops this process alone (`held_still`).
    ours = Ours(
        g.req.model_copy(update={"target_phase_s": g.req.target_phase_s * PAIRED_SHARE, "confine_user": None}), started
    )
    try:
        ours.problem, ours.output_specs, ours.flush, ours.group = g.problem, g.output_specs, g.flush, g.group
        ours.use_reference()
        if ours.shim.proc.pid not in g.ours_pids:  # started here, not with the run
            g.ours_pids.append(ours.shim.proc.pid)
        with held_still(g) as running:
            refuse_running(running)
            inputs = make_inputs(g.problem, g.req.task_name, _seed(), g.device)
            if g.gauge is not None:
                ours.gauge = g.gauge.beside(ours)
                ours.overhead_ms = ours.gauge.calibrate_beside(inputs)
            else:
                ours.overhead_ms = overheads(ours, inputs, g.group)
            summary = ReferenceCalls(ours).run_phase()
    finally:
        ours.close()
    g.stage_s["eager_now"] = time.perf_counter() - start
    return summary | {"calls_per_group": g.group}


def refuse_running(running: int) -> None:
    """`running` threads of the candidate's not stopped after the wait (`uids.frozen`), as eager is to be timed now:
    the candidate's `rejected` (work_while_stopped)."""
    from cuda_agent.judge.child.stop import stop
    from cuda_agent.types import Violation

    if running:
        message = f"{running} threads of your process kept running while it was stopped, between calls"
        raise stop("rejected", "eager_now", message, [Violation(check="work_while_stopped", message=message)])
