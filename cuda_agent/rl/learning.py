"""What a PPO run learned, per episode: verl's validation and rollout dumps read into a before/after table.

verl 0.9.1 writes every episode of a validation pass to `trainer.validation_data_dir/<step>.jsonl` and,
with `trainer.rollout_data_dir`, every training episode to `<step>.jsonl` there (`RayPPOTrainer._write_generations`):
one JSON object a line with `input` and `output` (the decoded prompt and response), `gts` (the row's
`reward_model.ground_truth`: our task reference), `score`, `step`, and every key of the samples'
`reward_extra_info` (the agent loop's `judged_fields` and episode fields: `passed`, `verified`,
`tool_call_turns`, `turns`, `response_tokens`, `clipped`, `our_failure`, ...). The dump does not carry the row's
data source, so the held-out tasks are named by reference (`held_out`, by default the agentic curriculum's).

The learning check is per run (one run, one seed): the change of each figure from the first validation
(step 0, before any update) to the last, with a 95% bootstrap interval over episodes, resampled within each task
(the same tasks are validated before and after; a task's episodes are its repeats). Across seeds only the
spread of the per-seed changes is reported: episodes of different seeds are never pooled. A run without dumps
still gets its before/after, from the means verl logged per data source (`logged_checkpoints`), without intervals.

    cuda-agent train report results/ppo_s0 results/ppo_s1 results/ppo_s2 --out results/report
"""

from __future__ import annotations

import json
import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from cuda_agent.errors import ConfigError
from cuda_agent.rl.agentic_curriculum import HELD_OUT

HELD_OUT_REFS = tuple(f"agentic/{name}" for name in HELD_OUT)
"""The agentic curriculum's held-out tasks: the default split of a report."""
Split = Literal["held_out", "train"]
FIGURES: dict[str, str] = {
    # EpisodeRecord field: what the tables call it
    "passed": "pass rate",
    "reward": "mean reward",
    "verified": "verified before finishing",
    "tool_call_turns": "valid tool-call rate",
    "valid_tool_calls": "well-formed calls",
    "turns": "turns",
    "tokens": "tokens",
    "clipped": "clipped",
}
CHECKED = ("passed", "reward", "verified", "tool_call_turns")
"""The figures whose change the learning check tests (what the curriculum teaches, and its outcome)."""


class EpisodeRecord(BaseModel):
    """One episode of a dump, in the figures the report uses (None: the run did not log that field)."""

    model_config = ConfigDict(extra="forbid")

    run: str = Field(description="The run (one seed) it belongs to: its folder's name.")
    kind: Literal["validation", "rollout"] = Field(description="A validation pass or a training step's rollout.")
    step: int = Field(description="verl's global step (validation at 0 is before the first update).")
    task: str = Field(description="The task reference (the dump's `gts`).")
    split: Split = Field(description="held_out or train.")
    dropped: bool = Field(description="Our failure: never scored, left out of every figure.")
    reward: float = Field(description="The judge's reward.")
    passed: float = Field(description="1.0 when the judge passed the episode's kernel.")
    verified: float | None = Field(default=None, description="1.0: verification ran after the last edit.")
    tool_call_turns: float | None = Field(default=None, description="Share of turns whose tool calls parsed.")
    valid_tool_calls: float | None = Field(default=None, description="Share of tool calls that were well formed.")
    turns: float | None = Field(default=None, description="Model turns.")
    tokens: float | None = Field(default=None, description="Response tokens (model and tool output).")
    clipped: float | None = Field(default=None, description="1.0: cut by its length (over-long).")
    verdict: str | None = Field(default=None, description="The judge's verdict name.")


def _number(value: Any) -> float | None:
    return None if value is None or isinstance(value, str) else float(value)


def episode_record(line: dict[str, Any], run: str, kind: str, held_out: frozenset[str]) -> EpisodeRecord:
    """One line of a verl dump as an `EpisodeRecord`.

    Raises:
        KeyError: the line lacks `gts`, `step` or `score` (not a verl dump line).
    """
    task = str(line["gts"])
    return EpisodeRecord(
        run=run,
        kind=kind,
        step=int(line["step"]),
        task=task,
        split="held_out" if task in held_out else "train",
        dropped=bool(_number(line.get("our_failure")) or 0.0),
        reward=float(line["score"]),
        passed=float(_number(line.get("passed")) or 0.0),
        verified=_number(line.get("verified")),
        tool_call_turns=_number(line.get("tool_call_turns")),
        valid_tool_calls=_number(line.get("valid_tool_calls")),
        turns=_number(line.get("turns")),
        tokens=_number(line.get("response_tokens")),
        clipped=_number(line.get("clipped")),
        verdict=line.get("verdict") if isinstance(line.get("verdict"), str) else None,
    )


def read_dumps(run_dir: Path, held_out: frozenset[str] = frozenset(HELD_OUT_REFS)) -> list[EpisodeRecord]:
    """Every episode of the verl dumps under `run_dir` (files named `<step>.jsonl`, in any folder of it), by folder
    and step.

    A dump is a validation's when its lines carry verl's `reward` (`_validate` adds each sample's score under that
    name; a training step's dump has no such key, and our fields never use the name: metrics.py), else a training
    step's rollout. bench/agentic_gpu.sh points verl at the run's `validation_data/` and `rollout_data/`.

    Raises:
        ConfigError: a dump line that is not verl's (says which file and line).
    """
    dumps = [p for p in Path(run_dir).rglob("*.jsonl") if p.stem.isdigit()]  # verl names each by its step
    records = []
    for path in sorted(dumps, key=lambda p: (p.parent, int(p.stem))):
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        kind = None
        for number, text in enumerate(lines, 1):
            try:
                line = json.loads(text)
                kind = kind or ("validation" if "reward" in line else "rollout")  # a file is one kind: its first line's
                records.append(episode_record(line, Path(run_dir).name, kind, held_out))
            except (ValueError, KeyError, TypeError) as exc:
                raise ConfigError(f"{path}:{number} is not a line of verl's generation dump ({exc})") from exc
    return records


class Checkpoint(BaseModel):
    """The figures of one validation pass on one split: means over its judged episodes (None: not logged)."""

    run: str = Field(description="The run (one seed).")
    split: str = Field(description="held_out or train; from verl's logged means, the data source when it is neither.")
    step: int = Field(description="verl's global step of the validation.")
    origin: Literal["dumps", "logged"] = Field(
        default="dumps", description="From the episodes' dumps, or from verl's logged means (a run without dumps)."
    )
    episodes: int | None = Field(description="Judged episodes (dropped ones out); None: verl's means do not say.")
    dropped: float | None = Field(description="Episodes dropped for our failure (logged: their share).")
    tasks: int | None = Field(description="Distinct tasks; None: verl's means do not say.")
    means: dict[str, float | None] = Field(description="FIGURES field -> mean over the judged episodes.")


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def checkpoint(episodes: list[EpisodeRecord]) -> Checkpoint:
    """The means of one validation pass on one split (`episodes` all of one run, split and step)."""
    judged = [e for e in episodes if not e.dropped]
    first = episodes[0]
    return Checkpoint(
        run=first.run,
        split=first.split,
        step=first.step,
        episodes=len(judged),
        dropped=len(episodes) - len(judged),
        tasks=len({e.task for e in judged}),
        means={field: _mean([getattr(e, field) for e in judged]) for field in FIGURES},
    )


LOGGED = {"passed": "passed", "reward": "score", "verified": "verified", "tool_call_turns": "tool_call_turns",
          "valid_tool_calls": "valid_tool_calls", "turns": "turns", "tokens": "response_tokens", "clipped": "clipped"}  # fmt: skip
"""FIGURES field -> the per-sample key whose mean verl logs per data source at each validation."""
_LOGGED_MEAN = re.compile(r"val-(?:aux|core)/(?P<source>.+)/(?P<key>[^/]+)/mean@(?P<n>\d+)")


def logged_checkpoints(run: str, steps: dict[int, dict[str, Any]]) -> list[Checkpoint]:
    """Each validation of a run without dumps, from the means verl logged per data source (`report.logged_steps`).

    verl's `val-aux/<source>/<key>/mean@N` averages every sample, a dropped one (our failure) included with 0 in
    each of our fields; every task has N samples, so the judged samples' mean is the logged one / (1 - dropped share).
    """
    checkpoints = []
    for step, data in steps.items():
        by_source: dict[str, dict[str, float]] = defaultdict(dict)
        for key, value in data.items():
            if (m := _LOGGED_MEAN.fullmatch(key)) and isinstance(value, int | float):
                by_source[m["source"]][m["key"]] = float(value)
        for source, logged in sorted(by_source.items()):
            if "score" not in logged and "reward" in logged:  # verl's own name for the sample's score
                logged["score"] = logged["reward"]
            dropped = logged.get("our_failure", 0.0)
            kept = 1.0 - dropped
            means = {f: logged[k] / kept if k in logged and kept > 0 else None for f, k in LOGGED.items()}
            checkpoints.append(
                Checkpoint(
                    run=run,
                    split=_split_of(source),
                    step=step,
                    origin="logged",
                    episodes=None,
                    dropped=dropped,
                    tasks=None,
                    means=means,
                )  # fmt: skip
            )
    return checkpoints


def _split_of(source: str) -> str:
    # bench/agentic_gpu.sh's validation rows name their split in the data source (agentic/held_out, agentic/train)
    return "held_out" if source.endswith("held_out") else "train" if source.endswith("/train") else source


class Change(BaseModel):
    """A figure's change from the first validation to the last, in one run and split."""

    run: str = Field(description="The run (one seed).")
    split: Split = Field(description="held_out or train.")
    figure: str = Field(description="An EpisodeRecord field of CHECKED.")
    before: float = Field(description="Mean at the first validation (step 0: before any update).")
    after: float = Field(description="Mean at the last validation.")
    change: float = Field(description="after - before.")
    low: float = Field(description="2.5th percentile of the bootstrap's changes.")
    high: float = Field(description="97.5th percentile.")

    @computed_field
    @property
    def visible(self) -> bool:
        """The whole interval is above 0 (a rise) or below it (a fall)."""
        return self.low > 0 or self.high < 0


def bootstrap_change(
    before: list[EpisodeRecord], after: list[EpisodeRecord], figure: str, draws: int = 4000, seed: int = 0
) -> tuple[float, float, float, float] | None:
    """The change of `figure`'s mean (after - before) and its 95% bootstrap interval.

    Each draw resamples, with replacement and within each task, the judged episodes before and after
    independently (the tasks are fixed by the validation set; the episodes of a task are its repeats).

    Returns:
        (mean before, mean after, low, high) with low and high the interval of after - before, or None when
        either side has no judged episode with the figure.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    sides = []
    for episodes in (before, after):
        by_task: dict[str, list[float]] = defaultdict(list)
        for e in episodes:
            if not e.dropped and getattr(e, figure) is not None:
                by_task[e.task].append(float(getattr(e, figure)))
        count = sum(len(v) for v in by_task.values())
        if not count:
            return None
        total = np.zeros(draws)
        for values in by_task.values():
            array = np.asarray(values)
            total += array[rng.integers(0, len(array), size=(draws, len(array)))].sum(axis=1)
        sides.append((sum(map(sum, by_task.values())) / count, total / count))
    (mean_before, draws_before), (mean_after, draws_after) = sides
    low, high = np.percentile(draws_after - draws_before, [2.5, 97.5])
    return mean_before, mean_after, float(low), float(high)


class RunLearning(BaseModel):
    """One run's before/after on each split it validated."""

    run: str = Field(description="The run (one seed).")
    checkpoints: list[Checkpoint] = Field(description="Every validation pass, per split, by step.")
    changes: list[Change] = Field(description="First validation -> last, per split and CHECKED figure.")


def run_learning(episodes: list[EpisodeRecord]) -> RunLearning:
    """The before/after of one run from its validation episodes (rollout episodes are ignored here)."""
    groups: dict[tuple[Split, int], list[EpisodeRecord]] = defaultdict(list)
    for e in episodes:
        if e.kind == "validation":
            groups[(e.split, e.step)].append(e)
    checkpoints = [checkpoint(groups[key]) for key in sorted(groups)]
    changes = []
    for split in ("held_out", "train"):
        steps = sorted(step for s, step in groups if s == split)
        if len(steps) < 2:
            continue
        before, after = groups[(split, steps[0])], groups[(split, steps[-1])]
        for figure in CHECKED:
            found = bootstrap_change(before, after, figure)
            if found is None:
                continue
            mean_before, mean_after, low, high = found
            changes.append(
                Change(
                    run=episodes[0].run,
                    split=split,
                    figure=figure,
                    before=mean_before,
                    after=mean_after,
                    change=mean_after - mean_before,
                    low=low,
                    high=high,
                )
            )
    return RunLearning(run=episodes[0].run if episodes else "", checkpoints=checkpoints, changes=changes)


def spread(runs: list[RunLearning]) -> list[dict[str, Any]]:
    """Per split and figure, the per-seed changes' mean, standard deviation, range and count of visible rises."""
    by_key: dict[tuple[str, str], list[Change]] = defaultdict(list)
    for run in runs:
        for change in run.changes:
            by_key[(change.split, change.figure)].append(change)
    rows = []
    for (split, figure), changes in sorted(by_key.items()):
        values = [c.change for c in changes]
        rows.append(
            {
                "split": split,
                "figure": figure,
                "seeds": len(values),
                "mean": statistics.mean(values),
                "sd": statistics.stdev(values) if len(values) > 1 else None,
                "min": min(values),
                "max": max(values),
                "rises": sum(1 for c in changes if c.low > 0),
            }
        )
    return rows
