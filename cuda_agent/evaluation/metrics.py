"""The paper's metrics, overall and per level, from task results.

Definitions (CUDA Agent, section 5; KernelBench `src/score.py`):
- every rate is over *all* tasks of the group: a task without a solution, or whose judgement
  failed, counts as failed, never as skipped;
- "faster than X" means correct and strictly more than 5% faster: t < 0.95 t_X (`reward.beats`, the
  same rule as the reward); where torch.compile could not compile the reference, eager is the bar,
  as in the reward;
- the speedups are geometric means of t_X / t over the correct solutions only;
- fast_p is KernelBench's: the share of all tasks that are correct with speedup strictly > p.
  ScalingIntelligence/KernelBench src/score.py (commit 7ed4e98), `fastp`:
  `fast_p_score = np.sum(speed_up > p); return fast_p_score / n`, with speed_up over correct
  samples only and n all problems. We report it against eager (KernelBench's baseline) and compile.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable

from cuda_agent.evaluation.records import GroupMetrics, Metrics, TaskResult
from cuda_agent.reward import beats_compile, beats_eager
from cuda_agent.types import Verdict

FAST_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)


def geometric_mean(values: Iterable[float]) -> float | None:
    """exp(mean(log v)); None for an empty sequence."""
    logs = [math.log(v) for v in values]
    return math.exp(sum(logs) / len(logs)) if logs else None


def _compile_ms(verdict: Verdict) -> float | None:
    """The compile bar: compile's time, or eager's where torch.compile failed on the reference."""
    t = verdict.timings_ms
    return t.compile if t.compile is not None else t.eager


def _speedup(verdict: Verdict, baseline_ms: float | None) -> float | None:
    solution_ms = verdict.timings_ms.solution
    return baseline_ms / solution_ms if baseline_ms and solution_ms else None


def group_metrics(verdicts: list[Verdict | None], outcomes: list[str]) -> GroupMetrics:
    """Metrics of one group. `verdicts[i]` is task i's scored verdict (None if none was reached);
    `outcomes[i]` names it for the counts ('missing', 'failed' or 'error' when there is no verdict). An 'error' is ours
    (no verdict exists): counted in `verdicts`, left out of every rate, as if the task had not been run."""
    n = sum(outcome != "error" for outcome in outcomes)
    correct = [v for v in verdicts if v is not None and v.verdict == "pass" and v.correct]
    vs_eager = [s for v in correct if (s := _speedup(v, v.timings_ms.eager)) is not None]
    vs_compile = [s for v in correct if (s := _speedup(v, _compile_ms(v))) is not None]
    rejections: Counter[str] = Counter(
        violation.check for v in verdicts if v is not None and v.verdict == "rejected" for violation in v.violations
    )

    def share(count: int) -> float:
        return count / n if n else 0.0

    own = sorted(f for v in correct if (f := v.custom_kernel_time_fraction) is not None)

    return GroupMetrics(
        tasks=n,
        correct=len(correct),
        pass_rate=share(len(correct)),
        faster_than_eager=share(sum(beats_eager(v.timings_ms) for v in correct)),
        faster_than_compile=share(sum(beats_compile(v.timings_ms) for v in correct)),
        geomean_speedup_eager=geometric_mean(vs_eager),
        geomean_speedup_compile=geometric_mean(vs_compile),
        fast_p_eager={f"{p:g}": share(sum(s > p for s in vs_eager)) for p in FAST_P},
        fast_p_compile={f"{p:g}": share(sum(s > p for s in vs_compile)) for p in FAST_P},
        verdicts=dict(sorted(Counter(outcomes).items())),
        rejections=dict(sorted(rejections.items())),
        custom_kernel_time_fraction=own[len(own) // 2] if own else None,
    )


NO_LEVEL = "no level"


def group_of(result: TaskResult) -> str:
    """'L1', 'L2', ... for KernelBench-style tasks; one group for tasks without a level (examples, Ops-6K)."""
    return f"L{result.level}" if result.level is not None else NO_LEVEL


def compute_metrics(results: list[TaskResult], pick: Callable[[TaskResult], Verdict | None] | None = None) -> Metrics:
    """Metrics overall and per group. `pick` chooses the verdict to score (default: `result.verdict`, the best)."""
    pick = pick or (lambda r: r.verdict)

    def outcome(result: TaskResult) -> str:
        verdict = pick(result)
        if verdict is not None:
            return verdict.verdict
        return result.status if result.status in ("failed", "error") else "missing"

    def metrics_of(rows: list[TaskResult]) -> GroupMetrics:
        return group_metrics([pick(r) for r in rows], [outcome(r) for r in rows])

    groups: dict[str, list[TaskResult]] = {}
    for result in results:
        groups.setdefault(group_of(result), []).append(result)
    return Metrics(overall=metrics_of(results), groups={k: metrics_of(v) for k, v in sorted(groups.items())})
