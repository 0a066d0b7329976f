"""Summarise bench/train_gpu.sh: reward curve, weight-sync and kill/resume checks, from verl's own metrics.

Reads, per seed folder `RES/seed<S>/`: `run/metrics.0.jsonl` (and `run/metrics.1.jsonl` after a kill and
`--resume`: `cuda-agent train` gives each launch its own file), verl's file logger lines `{"step": N, "data": {...}}`, and `probe.jsonl` (bench/train_gpu_probe.py).
Writes `RES/summary.json` and prints one line per check (PASS/FAIL) and the reward curve.

Checks:
- steps: the steps form one run 1..STEPS (the resumed run, if any, continues at KILL_AT+1);
- weight sync (per step): |log w| < 1e-3 for verl's token importance weights w = exp(actor - rollout log-prob),
  max and min over the batch, i.e. the rollout's log-probs agree with the fp32 actor's recomputation;
- probe: the fixed sequence's log-probs on the rollout server differ between consecutive training steps;
- resume: the resumed run starts right after the latest checkpoint at the kill (KILL_AT when SAVE_FREQ divides it)
  and its first step has the killed run's batch for that step (same prompt lengths), other metrics side by side.

Usage: python bench/train_gpu_report.py RES --steps 30 --kill-at 10
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

TOLERANCE = 1e-3
CURVE = ("critic/score/mean", "timing_s/cuda_agent/pass_rate", "actor/pg_loss", "critic/vf_loss", "actor/grad_norm")
RESUME_KEYS = ("prompt_length/mean", "critic/score/mean", "response_length/mean", "actor/entropy", "critic/vf_loss")


def read_steps(path: Path) -> dict[int, dict]:
    """step -> metrics (the last line of a step wins)."""
    if not path.exists():
        return {}
    steps: dict[int, dict] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            steps.setdefault(int(row["step"]), {}).update(row["data"])
    return steps


def sync_error(data: dict) -> float | None:
    """max |actor - rollout| log-prob over the step's tokens, from verl's importance-weight extremes."""
    values = [data.get(f"rollout_corr/rollout_is_{end}") for end in ("max", "min")]
    if any(v is None or v <= 0 for v in values):
        return None
    return max(abs(math.log(v)) for v in values)


def seed_summary(folder: Path, total: int, kill_at: int) -> dict:
    first, resumed = read_steps(folder / "run" / "metrics.0.jsonl"), read_steps(folder / "run" / "metrics.1.jsonl")
    marker = folder / "checkpoint_at_kill.txt"  # the latest checkpoint when the run was killed
    if kill_at > 0 and marker.exists():
        kill_at = int(marker.read_text().strip())
    merged = {**{s: d for s, d in first.items() if not resumed or s <= kill_at}, **resumed}
    checks: dict[str, dict] = {}
    order = sorted(merged)
    checks["steps"] = {"ok": order == list(range(1, total + 1)), "steps": order}
    errors = {s: sync_error(d) for s, d in merged.items()}
    known = {s: e for s, e in errors.items() if e is not None}
    checks["weight_sync"] = {
        "ok": bool(known) and len(known) == len(errors) and max(known.values()) < TOLERANCE,
        "max_abs_log_prob_diff": max(known.values(), default=None),
        "steps_measured": len(known),
    }
    probe = (
        [json.loads(line) for line in (folder / "probe.jsonl").read_text().splitlines()]
        if (folder / "probe.jsonl").exists()
        else []
    )
    by_step: dict[int, list[float]] = {}
    for row in probe:
        if row.get("global_steps") is not None:
            by_step.setdefault(int(row["global_steps"]), row["log_probs"])
    seen = sorted(by_step)
    changes = [
        max(abs(a - b) for a, b in zip(by_step[x], by_step[y], strict=True))
        for x, y in zip(seen, seen[1:], strict=False)
    ]
    checks["probe"] = {
        "ok": len(changes) >= 2 and all(c > 0 for c in changes),
        "weights_seen_at_steps": seen,
        "max_change_per_step": changes,
        "mean_log_prob": {s: statistics.fmean(v) for s, v in by_step.items()},
    }
    if kill_at > 0 and (first or resumed):
        step = kill_at + 1
        before, after = first.get(step, {}), resumed.get(step, {})
        compared = {k: (before.get(k), after.get(k)) for k in RESUME_KEYS if k in before and k in after}
        same_batch = compared.get("prompt_length/mean", (None, None))
        checks["resume"] = {
            "ok": bool(resumed) and min(resumed) == step and same_batch[0] == same_batch[1] is not None,
            "resumed_at": min(resumed) if resumed else None,
            "killed_after": max(first) if first else None,
            "step_compared": step,
            "metrics (killed run, resumed run)": compared,
        }
    curve = {key: [merged[s].get(key) for s in order] for key in CURVE}
    rewards = [r for r in curve["critic/score/mean"] if r is not None]
    return {
        "checks": checks,
        "curve": curve,
        "steps": order,
        "reward_first5": rewards[:5],
        "reward_last5": rewards[-5:],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--kill-at", type=int, default=0)
    args = parser.parse_args()
    summary = {}
    for folder in sorted(args.results.glob("seed*")):
        kill_at = args.kill_at if folder.name == sorted(args.results.glob("seed*"))[0].name else 0
        summary[folder.name] = seed_summary(folder, args.steps, kill_at)
    (args.results / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    for seed, result in summary.items():
        for name, check in result["checks"].items():
            detail = {k: v for k, v in check.items() if k != "ok" and k != "mean_log_prob"}
            print(f"{seed} {name}: {'PASS' if check['ok'] else 'FAIL'} {json.dumps(detail, default=str)[:400]}")
        print(f"{seed} reward per step: {result['curve']['critic/score/mean']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
