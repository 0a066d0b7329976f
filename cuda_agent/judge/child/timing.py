"""The timing protocol shared by the candidate and the eager/compile baselines.

CUDA: warm-up outside the timed region; each call's inputs are made (a fresh draw for the candidate, rotating
sets for the baselines) before the flush; before every timed call the L2 cache is flushed by
writing a buffer twice its size; the start event is recorded on the current stream, then the
call runs, then the whole device is synchronised and only then the end event is recorded, so
work left on any other stream lies inside the window (threat 5). The median of the repetitions
is reported. CPU: the same structure with `perf_counter` and a last-level-cache-sized write.

Callers pass the clock and synchronisation functions captured before any candidate code was
imported (see `guards.py`); this module never looks them up itself after import.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

CPU_FLUSH_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Clock:
    """Timer primitives captured before candidate code could patch them."""

    perf_counter: Callable[[], float]
    synchronize: Callable[[], None] | None
    event_cls: Any | None


@dataclass
class PhaseTiming:
    """Times of one timed phase, in milliseconds."""

    times_ms: list[float] = field(default_factory=list)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def spread(self) -> float:
        """(p90 - p10) / median: how noisy the phase was."""
        qs = statistics.quantiles(self.times_ms, n=10) if len(self.times_ms) >= 2 else [self.median_ms] * 9
        return (qs[-1] - qs[0]) / self.median_ms if self.median_ms > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "median_ms": self.median_ms,
            "min_ms": min(self.times_ms),
            "spread": self.spread,
            "reps": len(self.times_ms),
            "ci_ms": list(median_interval(self.times_ms)),
        }


Z_95 = 1.959964
"""The normal quantile of a two-sided 95 % interval."""


def median_interval(times_ms: Sequence[float]) -> tuple[float, float]:
    """A 95 % confidence interval of the median, free of any assumption on the times' distribution.

    The order statistics j and k around n/2 that the Binomial(n, 1/2) count of times below the median reaches
    with 95 % (its normal approximation, n/2 -+ 1.96 sqrt(n)/2). Timings have heavy upper tails (a preemption,
    a clock tick), which widen a mean's interval but move these order statistics little. Under 6 times: min to max.
    """
    ordered = sorted(times_ms)
    n = len(ordered)
    if n < 6:
        return ordered[0], ordered[-1]
    half = Z_95 * math.sqrt(n) / 2
    low = max(0, math.floor(n / 2 - half) - 1)  # 1-based rank floor(n/2 - half) as an index
    high = min(n - 1, math.ceil(n / 2 + half))  # 1-based rank ceil(n/2 + half) + 1, as an index
    return ordered[low], ordered[high]


def narrow_enough(times_ms: Sequence[float], width: float) -> bool:
    """Whether the median's interval is within `width` of the median on either side (a phase may stop)."""
    if len(times_ms) < 6:
        return False
    low, high = median_interval(times_ms)
    median = statistics.median(times_ms)
    return high - median <= width * median and median - low <= width * median


@dataclass(frozen=True)
class PhaseBudget:
    """How long a phase goes on past its target for a narrow interval of its median."""

    ci_width: float = 0.01
    """Stop once the median's 95 % interval is within this share of the median on either side..."""
    max_phase_s: float = 3.0
    """...or once this many seconds are spent (at least the target's)."""


def decision_interval(summary: dict[str, Any] | None, noise_floor: float) -> tuple[float, float] | None:
    """A phase's interval as the reward decides on it: the median's 95 % interval, widened to at least
    `noise_floor` of the median on either side (run-to-run drift of a machine's load, which no single phase's
    repetitions show: the CPU demo's candidate measured 0.0952 and 0.0991 ms in two runs minutes apart), and for a
    candidate's claimed times, above by the work per call the outside view could not have seen (`unseen_ms`,
    external_bound): a speed-up within what no one checked is a tie.
    None where the phase was not timed or recorded no interval (a baseline cached by an older judge)."""
    if not summary or "ci_ms" not in summary:
        return None
    median = summary["median_ms"]
    low, high = summary["ci_ms"]
    # A claimed time the outside view could not check beyond `unseen_ms` (external_bound) may be that much slower.
    return min(low, median * (1 - noise_floor)), max(high, median * (1 + noise_floor)) + summary.get("unseen_ms", 0.0)


def make_flusher(
    device: str, l2_bytes: int | None, reset_persisting: Callable[[], None] | None = None
) -> Callable[[], None]:
    """A function that evicts the cache by writing a buffer twice the cache's size.

    On CUDA, `reset_persisting` first turns persisting L2 lines back into normal ones, which an
    ordinary write would not evict (threat 16).
    """
    import torch

    if device == "cuda":
        nbytes = 2 * l2_bytes if l2_bytes else 256 * 1024 * 1024
    else:
        nbytes = CPU_FLUSH_BYTES
    buffer = torch.empty(nbytes // 4, dtype=torch.int32, device=device)

    def flush() -> None:
        if reset_persisting is not None:
            reset_persisting()
        buffer.fill_(0x5A5A5A5A)

    return flush


def _time_cuda(call: Callable[[Sequence[Any]], Any], inputs: Sequence[Any], clock: Clock) -> float:
    start, end = clock.event_cls(enable_timing=True), clock.event_cls(enable_timing=True)
    clock.synchronize()
    start.record()
    call(inputs)
    clock.synchronize()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def _time_cpu(call: Callable[[Sequence[Any]], Any], inputs: Sequence[Any], clock: Clock) -> float:
    start = clock.perf_counter()
    call(inputs)
    return (clock.perf_counter() - start) * 1e3


SKIP_PASS_CHANCE = 0.01
"""The chance, at most, that a solution skipping the work on more than half of the timed calls (the least that moves
their median) passes every check of a later call's output (`late_check_chance`)."""


def late_check_chance(spent_s: float, min_reps: int, max_reps: int, target_phase_s: float) -> float:
    """The chance that each timed call after the first min_reps has its output judged (timed_calls.py's `TimedCalls`).

    It holds a solution that skips the work on more than half of the calls the phase is expected to make, at the pace
    of its first min_reps (`spent_s` for them), to SKIP_PASS_CHANCE: about 1 in 22 where it makes 200 (KernelBench
    L1/19 on a GPU, timed calls alone), 1 in 13 where it makes 115 (the same, wall time counted). A solution cannot
    lower it: slow early calls make the estimate smaller and the chance larger, and skipped later calls, being
    fast, make more calls than estimated. 0 where the median cannot move without skipping some of the first
    min_reps calls, which the early checks (timed_calls.py's TIMED_CHECKS) judge.
    """
    pace = spent_s / min_reps
    left = max(0.0, target_phase_s - spent_s)
    later = min(max_reps - min_reps, math.ceil(left / pace) if pace > 0 else max_reps)
    must_skip = (min_reps + later) // 2 + 1  # skipped calls that move the median, the first min_reps honest
    if later < must_skip:
        return 0.0
    return 1.0 - SKIP_PASS_CHANCE ** (1.0 / must_skip)


CLAIM_MARGIN = 0.02
"""How far (a share of the claimed median) the grader's outside view may exceed the candidate's claim, besides the
noise floor, before the outside view is taken instead (`external_bound`)."""
NOISE_FLOOR_MS = {"cuda": 0.01, "cpu": 0.05}
"""The least difference `external_bound` acts on, whatever the overhead's measured spread."""
OVERHEAD_SHARE = 0.15
"""...and at least this share of the grader's median overhead per call: an honest 0.04 ms kernel on an H100 showed a
least gap 0.11 ms above the calibration's beside a 1.1 ms overhead per call (`bench/results/h100-2026-12-06-e/`). Work hidden below it is
what the outside view cannot tell from our own per-call cost."""


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


def _iqr(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    quartiles = statistics.quantiles(values, n=4)
    return quartiles[2] - quartiles[0]


def overhead_noise(overhead_ms: list[float], device: str) -> float:
    """The noise a request's outside view holds besides its work: twice the overhead's interquartile range, at least
    NOISE_FLOOR_MS and OVERHEAD_SHARE of its median (`external_bound`)."""
    floor = max(NOISE_FLOOR_MS[device], OVERHEAD_SHARE * _median(overhead_ms))
    return max(2 * _iqr(overhead_ms), floor)


LEAST_GAP_ALARM = 0.001
"""The chance that an honest phase's least gap lies beyond the calibration's quantile `least_quantile` picks."""


def least_quantile(requests: int) -> float:
    """The quantile of the calibration's overhead that the least of `requests` honest gaps stays below but for a
    chance of LEAST_GAP_ALARM: (1 - q) ** requests = LEAST_GAP_ALARM, and at least the first quartile. A phase of few
    requests (a request of many calls takes long) has a least gap far up the overhead's distribution: against the
    calibration's first quartile, 6 honest requests would all lie above it one time in 6 (0.75 ** 6)."""
    return max(0.25, 1.0 - LEAST_GAP_ALARM ** (1.0 / max(requests, 1)))


def _quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile of `values`, interpolated between order statistics (0 for none)."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    at = q * (len(ordered) - 1)
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def external_bound(
    claimed_ms: list[float], external_ms: list[float], overhead_ms: list[float], device: str, calls: int = 1
) -> dict[str, Any]:
    """The candidate's timed phase, from its own report and the grader's view from outside, per request of `calls`
    calls of forward (timing.group_size).

    `claimed_ms[i]`: the sum of what the candidate's process reported for request i's calls (its clock, in its
    process); `external_ms[i]`: what the grader saw, from its request to the answer with the outputs read;
    `overhead_ms`: the outside view less the report for requests of as many calls of a model that returns zeros,
    made before candidate code loaded. An honest report is the outside view less the overhead, within noise. Work the
    candidate's process does between the request and its clock's start, or after its clock stopped (its own hooks in
    the handling of the call, a rewritten clock), is inside the outside view and not in the report. Two readings of
    it, either enough:
    - every request's gap (outside less report) exceeds the least overhead by `hidden` (the least gap of the phase
      against the calibration's; noise only adds, so the least is what load disturbs least);
    - the outside view's median, less the overhead's, exceeds the claimed median (a majority of requests).
    Either counts where it exceeds CLAIM_MARGIN of the claimed median plus its noise (at least NOISE_FLOOR_MS and
    OVERHEAD_SHARE of the overhead's median): for the least gap, the calibration's low tail (its `least_quantile`
    for as many requests, at least its first quartile, less its least); for the medians, twice the overhead's
    interquartile range. Then the phase's times are the outside view's, and `bound_applied` says so.
    Only the sum of a request's claims is bounded, so a request's time is its calls' mean: the phase's times are per
    call (a request's over `calls`), and so is `resolution_ms`, the noise a claim can hide in, and `unseen_ms`, the work
    a claim could leave out and pass both readings (a few honest requests keep the least gap an honest one, so it is
    the median reading's allowance) beyond RESOLUTION_SHARE of the claim, the resolution group_size aims at and the
    design accepts: the reward's interval reaches that far above the claim (`decision_interval`). Where group_size
    reaches its aim (the GPU) it is about 0 for a claim near eager's, where the reward's margins decide; where the cap on calls per request or the machine's load keeps the noise
    above it (a CPU relu: 0.017 ms a call quiet, 0.15 to 0.4 under a load average of 4 on 2 cores), a claim faster
    than that is a tie.
    The overhead, the noise and the least gap and overhead (what `hidden` compares) are per request.
    """
    claimed = _median(claimed_ms)
    overhead = _median(overhead_ms)
    floor = max(NOISE_FLOOR_MS[device], OVERHEAD_SHARE * overhead)
    seen = [max(0.0, e - overhead) for e in external_ms]
    hidden = 0.0
    gaps = [e - c for e, c in zip(external_ms, claimed_ms, strict=True)]
    if external_ms and overhead_ms:
        least = min(overhead_ms)
        tail = _quantile(overhead_ms, least_quantile(len(gaps))) - least
        hidden = min(gaps) - least
        if hidden <= claimed * CLAIM_MARGIN + max(tail, floor):
            hidden = 0.0
    noise = overhead_noise(overhead_ms, device)
    by_median = _median(seen) > claimed * (1 + CLAIM_MARGIN) + noise
    # Work a claim may leave out and pass both readings: the median reading's allowance (a claim that leaves out work on
    # most requests and not on a few keeps the least gap an honest one), beyond the resolution group_size aims at
    # (RESOLUTION_SHARE of the call, which the design accepts). The reward's interval reaches that far above the
    # claimed median (`decision_interval`).
    unseen = max(0.0, noise - RESOLUTION_SHARE * claimed)
    applied = by_median or hidden > 0
    times = list(claimed_ms)
    if applied:
        times = [max(s if by_median else 0.0, c + hidden) for s, c in zip(seen, claimed_ms, strict=True)]
    return PhaseTiming(times_ms=[t / calls for t in times]).summary() | {
        "claimed_median_ms": claimed / calls,
        "external_median_ms": _median(seen) / calls,
        "hidden_ms": hidden / calls,
        "overhead_median_ms": overhead,
        "noise_ms": noise,
        "least_gap_ms": min(gaps, default=0.0),
        "least_overhead_ms": min(overhead_ms, default=0.0),
        "calls_per_request": calls,
        "resolution_ms": noise / calls,
        "unseen_ms": unseen / calls if overhead_ms else 0.0,
        "bound_applied": applied,
    }


PHASE_PROBE_CHANCE = 1 / 3
"""The chance that a timed request follows a request of the zero model (`calibration.probe_among_timed`), drawn in the
grader: the overhead now, beside the calibration's before candidate code (`drift_corrected`)."""
PHASE_PROBES_LEAST = 3
"""The fewest such requests whose least `drift_corrected` goes by."""


def drift_corrected(overhead_ms: list[float], probes_ms: list[float]) -> tuple[list[float], float]:
    """The calibration's overheads (made before candidate code) moved down by how far the least of the requests of the
    zero model made among the timed ones lies below theirs, and that shift; never moved up.

    A calibration made while the machine was busier than during the timed phase holds every gap of the phase below
    its least overhead, and hides work of as much in every request (a clock stopped during forward would pass). The
    least, not the median: a
    calibration with a few slow requests has a high median and a true least, and moving it by the medians would
    make honest gaps read as hidden work. The phase's probes run in the candidate's process, whose code may slow them or
    report less for them (a rewritten clock): that can only raise their overhead, which is never taken; a report of
    more only lowers it, against the candidate. Load that grows after the calibration is the gauge's to measure
    (child/gauge.py: on the CPU; on CUDA it still reads as hidden work, DESIGN.md)."""
    if len(probes_ms) < PHASE_PROBES_LEAST:
        return overhead_ms, 0.0
    shift = max(0.0, min(overhead_ms) - min(probes_ms))
    return [o - shift for o in overhead_ms], shift


RESOLUTION_SHARE = 0.02
"""The outside view's per-call resolution that `group_size` aims at, as a share of eager's time per call: a claim
faster than the call by more than this (plus CLAIM_MARGIN) shows, whatever clock the candidate's process reads."""
GROUP_BYTES = {"cpu": 64 * 2**20, "cuda": 2**30}
"""The most bytes a request's inputs and outputs may take together (`group_size`)."""
GROUP_FDS = 240
"""CPU: the most input tensors a request may carry (each a descriptor of its own; exchange.MAX_FDS per message)."""
GROUP_PLACES = 1024
"""The most outputs a request's calls may return together: the answer says where each lies (protocol.OutputPlace,
up to about 120 bytes of JSON), within exchange.MAX_MESSAGE_BYTES."""
GROUP_CHECKS = 4
"""Outputs of a request of several calls judged besides the ones its kind always judges, on average (each with a
chance of GROUP_CHECKS over its calls, drawn after the answer): a request's time is its calls' mean, so a solution
that skips the work on a share s of the calls gains s and passes n requests' checks with a chance of (1 - s) ** (n *
GROUP_CHECKS)."""
MIN_GROUPS = 6
"""The fewest requests (or baseline groups) a phase makes, when min_reps calls fit in fewer: the least that gives its
median an interval (`median_interval`)."""


def group_size(
    noise_ms: float, eager_ms: float, call_bytes: int, tensor_inputs: int, device: str, most: int, outputs: int = 1
) -> int:
    """How many calls each request carries, so that the outside view's per-call resolution (the per-request
    overhead's noise over the calls) is RESOLUTION_SHARE of eager's call: 1 where eager's calls already dwarf the
    noise, else a power of two (the same for a range of noise, so a task's baselines are rarely timed again), at most
    `most`, GROUP_BYTES of inputs and outputs (`call_bytes` a call), GROUP_PLACES outputs (`outputs` a call) and, on
    the CPU, GROUP_FDS input tensors.

    It is chosen from the reference and the grader's own overhead, before candidate code loads: nothing the candidate
    does moves it."""
    wanted = math.ceil(noise_ms / (RESOLUTION_SHARE * eager_ms)) if eager_ms > 0 else most
    if wanted <= 1:
        return 1
    size = min(1 << (wanted - 1).bit_length(), most, GROUP_BYTES[device] // max(call_bytes, 1))
    size = min(size, GROUP_PLACES // max(outputs, 1))
    if device == "cpu":
        size = min(size, GROUP_FDS // max(tensor_inputs, 1))
    return max(1, size)


def group_reps(reps: int, calls: int) -> int:
    """Requests (or baseline groups) of `calls` calls that make at least `reps` calls, and at least MIN_GROUPS
    (`reps` where fewer)."""
    return max(min(reps, MIN_GROUPS), math.ceil(reps / calls))


def rotate(input_sets: Sequence[Sequence[Any]]) -> Callable[[int], Sequence[Any]]:
    """`inputs_for` for `time_phase` that cycles over input sets made beforehand."""
    return lambda i: input_sets[i % len(input_sets)]


def time_phase(
    call: Callable[[Sequence[Any]], Any],
    inputs_for: Callable[[int], Sequence[Any]],
    clock: Clock,
    flush: Callable[[], None],
    device: str,
    *,
    warmup_reps: int,
    min_reps: int,
    max_reps: int,
    target_phase_s: float,
    tick: Callable[[], None] | None = None,
    spent: Callable[[], float] | None = None,
    budget: PhaseBudget | None = None,
    group: int = 1,
    _timers: tuple[Callable[..., float], Callable[..., float]] = (_time_cuda, _time_cpu),  # noqa: B008
) -> PhaseTiming:
    """Time `call(inputs_for(i))`, the i-th call of the phase (warm-up calls first, counted from 0), in groups of
    `group` calls back to back after one cache flush, as the candidate's requests are (`group_size`): each time is a
    group's over its calls.

    Args:
        call: runs the model on one input set.
        inputs_for: the i-th call's inputs, made for this phase alone (`rotate(sets)`, or a fresh draw per call).
            It runs outside the timed window, before the cache flush.
        clock: captured timer primitives.
        flush: cache flush, run before every timed group.
        device: 'cuda' or 'cpu'.
        warmup_reps: untimed calls first (whole groups of them).
        min_reps, max_reps: bounds on timed calls (`group_reps` groups at least; max_reps groups at most).
        target_phase_s: stop once min_reps is reached and this much of the phase's budget is spent (`spent`).
        tick: called after every group, outside the timed window (progress for the grader's step limit).
        spent: the seconds of `target_phase_s` the timed calls have used, read after each; None: their timed
            windows alone. The candidate's phase counts its wall time (timed_calls.py): its fresh input draws cost as
            much as a memory-bound call, and it is the time the phase holds the GPU that the budget is for.
        budget: how far past `target_phase_s` the phase goes for a narrow interval of its median (`done`); None:
            it stops at the target.
        group: calls per timed group, each on its own inputs (`inputs_for` should give that many distinct sets).
        _timers: the CUDA and CPU timers, bound when this module loads: a solution that replaces the module's
            functions (through `torch.sys.modules`, say) does not reach them here.
    """

    def calls(sets: Sequence[Sequence[Any]]) -> None:
        for inputs in sets:
            call(inputs)  # its result let go at once, as the candidate's process lets each go after copying it

    def sets(first: int) -> list[Sequence[Any]]:
        return [inputs_for(first + j) for j in range(group)]

    warmup_groups = math.ceil(warmup_reps / group)
    for i in range(warmup_groups):
        calls(sets(i * group))
        if tick is not None:
            _sync(clock)
            tick()
    _sync(clock)
    phase = PhaseTiming()
    spent_s = 0.0
    least = group_reps(min_reps, group)
    for i in range(max_reps):
        # Not bound to a local: the group before's inputs are freed before the next are made (multi-GB at L1 sizes).
        timed = _timers[0] if device == "cuda" else _timers[1]
        ms = timed(calls, _flushed(sets((warmup_groups + i) * group), flush), clock) / group
        phase.times_ms.append(ms)
        if tick is not None:
            tick()
        spent_s += ms * group / 1e3
        if i + 1 >= least and done(phase.times_ms, spent_s if spent is None else spent(), target_phase_s, budget):
            break
    return phase


def done(times_ms: Sequence[float], spent_s: float, target_phase_s: float, budget: PhaseBudget | None) -> bool:
    """Whether a phase that made its fewest calls may stop: `target_phase_s` spent and the median's interval narrow
    enough (`budget.ci_width`), or `budget.max_phase_s` spent however wide it still is."""
    if budget is None or spent_s >= max(budget.max_phase_s, target_phase_s):
        return spent_s >= target_phase_s
    return spent_s >= target_phase_s and narrow_enough(times_ms, budget.ci_width)


def _flushed(inputs: Sequence[Any], flush: Callable[[], None]) -> Sequence[Any]:
    """`inputs`, after the cache flush (which follows their making, so they are not left in the cache)."""
    flush()
    return inputs


def _sync(clock: Clock) -> None:
    if clock.synchronize is not None:
        clock.synchronize()
