"""The paper's reward: the only place its thresholds live.

r = -1 if the candidate failed to compile or was wrong (any verdict but 'pass');
r = 3 if it is more than 5% faster than both eager and torch.compile (t < 0.95 t0, strictly);
r = 2 if more than 5% faster than eager only; r = 1 otherwise.
"""

from __future__ import annotations

SPEEDUP_MARGIN = 0.95
"""A candidate beats a baseline when its time is strictly below 0.95 of the baseline's."""


def beats(solution_ms: float | None, baseline_ms: float | None) -> bool:
    """True when the candidate is more than 5% faster than the baseline (strictly)."""
    return solution_ms is not None and baseline_ms is not None and solution_ms < SPEEDUP_MARGIN * baseline_ms


def compute_reward(verdict: str, solution_ms: float | None, eager_ms: float | None, compile_ms: float | None) -> int:
    """Reward in {-1, 1, 2, 3} for one judged candidate.

    Args:
        verdict: the judge's verdict name; anything but 'pass' earns -1.
        solution_ms, eager_ms, compile_ms: median times in ms (None where not measured).

    Example:
        >>> compute_reward("pass", 0.9, 1.0, 1.0)
        3
        >>> compute_reward("pass", 0.95, 1.0, 2.0)
        1
    """
    if verdict != "pass":
        return -1
    faster_than_eager = beats(solution_ms, eager_ms)
    # A task torch.compile cannot handle has no compile time; faster than eager is then the bar.
    faster_than_compile = beats(solution_ms, compile_ms) if compile_ms is not None else faster_than_eager
    if faster_than_eager and faster_than_compile:
        return 3
    if faster_than_eager:
        return 2
    return 1
