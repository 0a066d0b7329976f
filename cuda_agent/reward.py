"""The paper's reward: the only place its thresholds live.

r = -1 if the candidate failed to compile or was wrong (any verdict but 'pass');
r = 3 if it is more than 5% faster than both eager and torch.compile (t < 0.95 t0, strictly);
r = 2 if more than 5% faster than eager only; r = 1 otherwise.

Where the judge decided on kernel times (`Timings.basis`: eager's whole call is mostly overhead), the same rule
applies to them. Where the judge measured intervals (`Timings.solution_ci` and the baselines'), "more than 5% faster" must hold
across them: the candidate's slowest plausible time below 0.95 of the baseline's fastest plausible one. A
difference within the noise of the measurements is a tie, and a tie is not faster.
"""

from __future__ import annotations

from cuda_agent.types import KernelTimings, Timings

SPEEDUP_MARGIN = 0.95
"""A candidate beats a baseline when its time is strictly below 0.95 of the baseline's."""

Interval = tuple[float, float]


def beats(
    solution_ms: float | None,
    baseline_ms: float | None,
    solution_ci: Interval | None = None,
    baseline_ci: Interval | None = None,
) -> bool:
    """True when the candidate is more than 5% faster than the baseline (strictly).

    With both intervals (low, high) in ms, across them: the candidate's high below 0.95 of the baseline's low.

    Example:
        >>> beats(0.90, 1.0)
        True
        >>> beats(0.90, 1.0, (0.88, 0.97), (0.97, 1.03))
        False
    """
    if solution_ms is None or baseline_ms is None:
        return False
    if solution_ci is not None and baseline_ci is not None:
        return solution_ci[1] < SPEEDUP_MARGIN * baseline_ci[0]
    return solution_ms < SPEEDUP_MARGIN * baseline_ms


def decided_on(timings: Timings) -> Timings | KernelTimings:
    """The times the reward is decided on: the kernel times where `timings.basis` says so, else the whole calls."""
    return timings.kernel if timings.basis == "kernel" and timings.kernel is not None else timings


def beats_eager(timings: Timings) -> bool:
    """The candidate is more than 5% faster than eager, on the timings' basis, across the intervals where they were
    measured."""
    t = decided_on(timings)
    return beats(t.solution, t.eager, t.solution_ci, t.eager_ci)


def beats_compile(timings: Timings) -> bool:
    """...than torch.compile; a task torch.compile cannot handle has no compile time, and eager is then the bar."""
    t = decided_on(timings)
    if t.compile is None:
        return beats_eager(timings)
    return beats(t.solution, t.compile, t.solution_ci, t.compile_ci)


def compute_reward(verdict: str, solution_ms: float | None, eager_ms: float | None, compile_ms: float | None) -> int:
    """Reward in {-1, 1, 2, 3} for one judged candidate, from point times (`reward_of` decides on intervals).

    Args:
        verdict: the judge's verdict name; anything but 'pass' earns -1.
        solution_ms, eager_ms, compile_ms: median times in ms (None where not measured).

    Example:
        >>> compute_reward("pass", 0.9, 1.0, 1.0)
        3
        >>> compute_reward("pass", 0.95, 1.0, 2.0)
        1
    """
    return reward_of(verdict, Timings(solution=solution_ms, eager=eager_ms, compile=compile_ms))


def reward_of(verdict: str, timings: Timings) -> int:
    """Reward in {-1, 1, 2, 3} for one judged candidate, across the intervals its timings hold.

    Example:
        >>> reward_of("pass", Timings(solution=0.9, eager=1.0, compile=1.0))
        3
        >>> reward_of("pass", Timings(solution=0.9, eager=1.0, solution_ci=(0.89, 0.93), eager_ci=(0.97, 1.02)))
        1
    """
    if verdict != "pass":
        return -1
    faster_than_eager = beats_eager(timings)
    if faster_than_eager and beats_compile(timings):
        return 3
    if faster_than_eager:
        return 2
    return 1
