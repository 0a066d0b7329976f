"""Training metrics of judged rollouts: per-sample fields, and their aggregate over a batch.

Both training paths give every sample the same flat, numeric fields (`judged_fields`): the agent
loop puts them in `extra_fields["reward_extra_info"]`, and the single-turn reward function returns
them from `compute_score`. verl 0.9.1 then carries them as follows:
- validation (and the `collect` stage, which is validation only): verl averages every numeric
  reward-extra key per data source, e.g. `val-aux/kernelbench/L1/passed/mean@4`;
- training steps: verl logs only its own batch metrics, so `CudaAgentLoopManager`
  (`cuda_agent.rl.agent_loop`) adds `episode_metrics` of the batch to the rollout's timing dict,
  which verl's legacy trainer logs with a `timing_s/` prefix: `timing_s/cuda_agent/pass_rate`;
- `trainer.rollout_data_dir` / `trainer.validation_data_dir` dump them per sample as JSONL.

Never name a field `reward`: verl's validation keeps its own `reward` list and checks lengths.

Our failures (the sandbox or the model server broke; DESIGN 3 "whose failure is it") are never
scored: the sample gets `our_failure` 1.0 and verdict "dropped" (`dropped_fields`), and its response
mask is zeroed before it joins the batch (the agent loop's own drop, or `mask_our_failure` in our
agent-loop worker for a reward function's), so it adds nothing to the actor's or the critic's loss
(verl's `seq-mean-token-mean` skips fully masked sequences) and nothing to the advantages. The reward statistics here leave dropped samples out and count them
(`our_failures`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from cuda_agent.errors import ContextLengthError, InfraError, ModelError
from cuda_agent.reward import beats_compile, beats_eager
from cuda_agent.types import Timings

REWARDS = (-1, 1, 2, 3)
"""The paper's reward values: the buckets of the reward histogram."""
PREFIX = "cuda_agent/"
OUR_FAILURES = (InfraError, ModelError)
"""Exceptions that mean we failed, not the candidate: the sample is dropped and counted, never scored."""


def is_our_failure(exc: BaseException) -> bool:
    """True for our failures (`OUR_FAILURES`); a full context is the episode's end, not ours."""
    return isinstance(exc, OUR_FAILURES) and not isinstance(exc, ContextLengthError)


def judged_fields(verdict: Mapping[str, Any] | None, reward: float, our_failure: bool = False) -> dict[str, Any]:
    """The per-sample fields of one judged candidate, the same keys whatever happened.

    Args:
        verdict: the judge's verdict as a dict (DESIGN 3), `{"verdict": "malformed"}` for an answer
            that never reached the judge, or None when nothing was judged.
        reward: the reward the sample gets.

    Returns:
        score, verdict, passed, faster_than_eager, faster_than_compile (0.0 / 1.0: "faster" is more
        than 5% faster, as in the reward and `cuda-agent bench`; with no compile time the compile
        bar is eager's) and speedup_vs_compile (None unless it passed).
    """
    verdict = verdict or {}
    passed = verdict.get("verdict") == "pass"
    timings = Timings.model_validate(verdict.get("timings_ms") or {})
    return {
        "score": float(reward),
        "verdict": str(verdict.get("verdict", "none")),
        "passed": float(passed),
        "faster_than_eager": float(passed and beats_eager(timings)),
        "faster_than_compile": float(passed and beats_compile(timings)),
        "speedup_vs_compile": verdict.get("speedup_vs_compile") if passed else None,
        "our_failure": float(our_failure),
        # Answered from the judge's verdict cache (a candidate judged before): how much judging a step repeats.
        "cached": float(bool((verdict.get("env") or {}).get("verdict_cached"))),
    }


def dropped_fields(reason: str) -> dict[str, Any]:
    """The per-sample fields of a sample dropped for our failure: same keys, score 0, our_failure 1."""
    return judged_fields({"verdict": "dropped", "message": reason}, 0.0, our_failure=True)


def mask_our_failure(outputs: list[Any]) -> bool:
    """Zero the response mask of a trajectory's samples when its reward says our judge failed (`our_failure`).

    Args:
        outputs: verl's `AgentLoopOutput`s of one trajectory, the last one carrying the reward's
            `extra_fields["reward_extra_info"]` (the single-turn reward function's `judged_fields`).

    Returns:
        Whether the trajectory was dropped.
    """
    info = (outputs[-1].extra_fields or {}).get("reward_extra_info") or {} if outputs else {}
    if not float(info.get("our_failure") or 0.0) > 0:
        return False
    for output in outputs:
        output.response_mask = [0] * len(output.response_mask)
    return True


def _numbers(values: Iterable[Any] | None) -> list[float]:
    if values is None:
        return []
    out = []
    for value in values:
        if value is None or isinstance(value, str):
            continue
        number = float(value)
        if not math.isnan(number):
            out.append(number)
    return out


def _passed_speedups(columns: Mapping[str, Iterable[Any]]) -> list[float]:
    # Over passed samples only: a failed candidate can carry a timing, and must not count.
    speedups = list(columns.get("speedup_vs_compile", ()))
    passed = list(columns.get("passed", [1.0] * len(speedups)))
    return [float(s) for s, ok in zip(speedups, passed, strict=False) if ok and s is not None and float(s) > 0]


def _spread(name: str, values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {f"{name}/mean": sum(values) / len(values), f"{name}/min": min(values), f"{name}/max": max(values)}


def _judging(columns: Mapping[str, Iterable[Any]]) -> dict[str, float]:
    """The batch's judgements (totals: fresh vs from the verdict cache, the episodes' own checks) and the
    episodes' seconds in the model and in tools (means)."""
    out = {}
    judged, cached = _numbers(columns.get("judgements")), _numbers(columns.get("cached_judgements"))
    if judged:
        out["judgements/fresh"] = sum(judged) - sum(cached)
        out["judgements/cached"] = sum(cached)
    checks = _numbers(columns.get("tool_checks"))
    if checks:
        out["judgements/tool_checks"] = sum(checks)
    for field in ("model_s", "tools_s"):
        values = _numbers(columns.get(field))
        if values:
            out[f"{field}/mean"] = sum(values) / len(values)
    return out


def episode_metrics(columns: Mapping[str, Iterable[Any]], prefix: str = PREFIX) -> dict[str, float]:
    """Aggregate a batch's per-sample fields into scalars for verl's logger.

    Args:
        columns: field name -> one value per sample (lists or numpy arrays, e.g. verl's
            `non_tensor_batch`); `score` is required, the others are used when present.
        prefix: put before every key.

    Samples flagged `our_failure` are left out of every statistic and counted in `our_failures`.

    Returns:
        our_failures (count), reward/{mean,min,max}, reward/share_{-1,1,2,3} (the histogram, as shares of the batch),
        pass_rate, faster_than_eager_rate, faster_than_compile_rate, verdict/<name> shares,
        speedup_vs_compile/geomean (over passed samples), turns/{mean,min,max}, response_tokens/{mean,min,max},
        clipped_ratio, verdict_cached_rate, verified_before_finish_rate, valid_tool_call_rate,
        tool_call_turn_rate, judge_s/{mean,max}, judgements/{fresh,cached,tool_checks} (totals of the batch) and
        model_s/mean, tools_s/mean (an episode's seconds); {} for a batch without `score`.

    Example:
        >>> m = episode_metrics({"score": [-1, 3], "passed": [0.0, 1.0], "verdict": ["rejected", "pass"]})
        >>> m["cuda_agent/pass_rate"], m["cuda_agent/reward/share_3"], m["cuda_agent/verdict/rejected"]
        (0.5, 0.5, 0.5)
    """
    failures = [bool(f) and float(f) > 0 for f in columns.get("our_failure", ())]
    if any(failures):
        columns = {
            key: [v for v, failed in zip(values, failures, strict=False) if not failed]
            for key, values in columns.items()
        }
    scores = _numbers(columns.get("score"))
    if not scores and not any(failures):
        return {}
    n = max(len(scores), 1)
    metrics: dict[str, float] = {"our_failures": float(sum(failures))}
    metrics.update(_spread("reward", scores))
    metrics.update({f"reward/share_{r}": sum(1 for s in scores if s == r) / n for r in REWARDS})
    for field, name in (
        ("passed", "pass_rate"),
        ("faster_than_eager", "faster_than_eager_rate"),
        ("faster_than_compile", "faster_than_compile_rate"),
        ("clipped", "clipped_ratio"),
        ("cached", "verdict_cached_rate"),
        ("verified", "verified_before_finish_rate"),
        ("valid_tool_calls", "valid_tool_call_rate"),
        ("tool_call_turns", "tool_call_turn_rate"),
    ):
        flags = _numbers(columns.get(field))
        if flags:
            metrics[name] = sum(flags) / len(flags)
    verdicts = Counter(str(v) for v in columns.get("verdict", ()) if v is not None)
    metrics.update({f"verdict/{name}": count / n for name, count in sorted(verdicts.items())})
    speedups = _passed_speedups(columns)
    if speedups:
        metrics["speedup_vs_compile/geomean"] = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
    metrics.update(_spread("turns", _numbers(columns.get("turns"))))
    metrics.update(_spread("response_tokens", _numbers(columns.get("response_tokens"))))
    judge_s = _numbers(columns.get("judge_s"))
    if judge_s:
        metrics.update({"judge_s/mean": sum(judge_s) / len(judge_s), "judge_s/max": max(judge_s)})
    metrics.update(_judging(columns))
    return {f"{prefix}{key}": float(value) for key, value in metrics.items()}
