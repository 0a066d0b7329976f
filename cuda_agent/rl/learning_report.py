"""The report over one or more PPO runs (one per seed): the before/after table, the learning check per seed,
the spread across seeds and, per step, what the training did (judging, entropy, the rollout-vs-actor gap,
clipped episodes, where the step's time went), as `report.md` with PNG figures beside it.

    cuda-agent train report results/ppo_s0 results/ppo_s1 results/ppo_s2 --out results/report

Each run folder is a `cuda-agent train agentic-ppo --out` folder: verl's `metrics.<n>.jsonl` (per step) and,
when the run set `trainer.validation_data_dir` / `trainer.rollout_data_dir` there (bench/agentic_gpu.sh does),
its `validation_data/` and `rollout_data/` dumps (per episode; `learning.py`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cuda_agent.errors import ConfigError
from cuda_agent.rl.learning import (
    CHECKED,
    FIGURES,
    HELD_OUT_REFS,
    Checkpoint,
    EpisodeRecord,
    RunLearning,
    logged_checkpoints,
    read_dumps,
    run_learning,
    spread,
)
from cuda_agent.rl.report import StepMetrics, logged_steps, metrics_files, report_run, step_metrics

SPLITS = {"held_out": "held-out tasks", "train": "training tasks"}
TIME_PARTS = (
    # StepMetrics field (or a share of the rollout), label
    ("model", "generation: model"),
    ("tools", "generation: tools (builds, checks)"),
    ("judge", "generation: final judgement"),
    ("reward_s", "reward"),
    ("prepare_s", "log-probs, values, GAE"),
    ("update_s", "update (actor, critic)"),
)


def _fmt(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def time_split(step: StepMetrics) -> dict[str, float]:
    """Seconds of one step by part (TIME_PARTS' labels, then "other").

    Episodes run concurrently, so the rollout's wall time (`rollout_s`) is split between the model, the tools and
    the final judgement in the proportion of the episodes' own mean seconds in each; without those, it is one part.
    """
    parts: dict[str, float] = {}
    shares = {"model": step.model_s_mean, "tools": step.tools_s_mean, "judge": step.judge_s_mean}
    known = sum(v for v in shares.values() if v)
    if step.rollout_s is not None:
        if known > 0:
            parts.update({key: step.rollout_s * (value or 0.0) / known for key, value in shares.items()})
        else:
            parts["model"] = step.rollout_s
    for key in ("reward_s", "prepare_s", "update_s"):
        if getattr(step, key) is not None:
            parts[key] = getattr(step, key)
    labels = dict(TIME_PARTS)
    out = {labels[key]: value for key, value in parts.items()}
    if step.step_s is not None:
        out["other"] = max(step.step_s - sum(parts.values()), 0.0)
    return out


OUTSIDE = {"fontsize": 7, "loc": "upper left", "bbox_to_anchor": (1.01, 1.0)}
"""Legends beside a panel, never on its data."""


def step_figure(steps: list[StepMetrics], title: str, path: Path) -> Path:
    """Four panels per training step: judgements (fresh, cached, the episodes' checks); entropy and the
    rollout-vs-actor log-prob gap; clipped, verified and tool-call shares; the step's time by part."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    trained = [s for s in steps if _trained(s)]
    fig, axes = plt.subplots(2, 2, figsize=(15, 7.5))
    for draw, ax in zip(
        (_draw_judging, _draw_policy, _draw_episodes, _draw_step_time), (a for row in axes for a in row), strict=True
    ):
        draw(ax, trained)
        _draw_step_axis(ax, [s.step for s in trained])
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90, metadata={"Software": None})
    plt.close(fig)
    return path


def _draw_judging(ax: Any, steps: list[StepMetrics]) -> None:
    x = [s.step for s in steps]
    fresh = [s.judgements_fresh or 0.0 for s in steps]
    ax.bar(x, fresh, label="fresh judgements", color="#1565c0")
    ax.bar(x, [s.judgements_cached or 0.0 for s in steps], bottom=fresh, label="verdict cache hits", color="#90caf9")
    ax.plot(x, [s.tool_checks for s in steps], "k.--", label="episodes' own checks")
    ax.set_ylabel("per step")
    ax.set_title("judging")
    ax.legend(**OUTSIDE)


def _draw_policy(ax: Any, steps: list[StepMetrics]) -> None:
    x = [s.step for s in steps]
    ax.plot(x, [s.entropy for s in steps], "-o", markersize=3, label="policy entropy", color="#6a1b9a")
    ax.set_ylabel("entropy per token")
    gap = ax.twinx()
    gap.plot(x, [s.logprob_gap for s in steps], "--s", markersize=3, color="#ef6c00", label="log-prob gap")
    gap.set_ylabel("|rollout - actor| log-prob per token")
    ax.set_title("policy")
    gap.legend(*_handles(ax, gap), fontsize=7, loc="best")  # inside: beside it, the second axis's labels are


def _draw_episodes(ax: Any, steps: list[StepMetrics]) -> None:
    for name, label in (("clipped_ratio", "clipped (over-long)"), ("verified_rate", "verified before finishing"),
                        ("tool_call_turn_rate", "valid tool-call rate"), ("pass_rate", "pass rate")):  # fmt: skip
        ax.plot([s.step for s in steps], [getattr(s, name) for s in steps], "-o", markersize=3, label=label)
    ax.set_ylim(-0.05, 1.05)
    ax.set_ylabel("share of episodes")
    ax.set_title("episodes")
    ax.legend(**OUTSIDE)


def _draw_step_time(ax: Any, steps: list[StepMetrics]) -> None:
    x = [s.step for s in steps]
    bottom = [0.0] * len(steps)
    splits = [time_split(s) for s in steps]
    for label in [label for _, label in TIME_PARTS] + ["other"]:
        heights = [split.get(label, 0.0) for split in splits]
        if any(heights):
            ax.bar(x, heights, bottom=bottom, label=label)
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    ax.set_ylabel("seconds")
    ax.set_title("step time")
    ax.legend(**OUTSIDE)


def _draw_step_axis(ax: Any, x: list[int]) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.set_xlabel("step")
    if x:  # the same steps on every panel, whole numbers only (one step alone drew ticks at 0.95 ... 1.05)
        ax.set_xlim(min(x) - 0.6, max(x) + 0.6)
        if len(x) <= 20:
            ax.set_xticks(x)
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _trained(step: StepMetrics) -> bool:
    """A training step (validation-only steps, such as step 0, log no step or rollout time)."""
    return step.step_s is not None or step.rollout_s is not None


def _handles(*axes: object) -> tuple[list, list]:
    handles, labels = [], []
    for ax in axes:
        h, lab = ax.get_legend_handles_labels()  # type: ignore[attr-defined]
        handles += h
        labels += lab
    return handles, labels


def learning_figure(runs: list[RunLearning], path: Path) -> Path:
    """The learning check, drawn: per checked figure a panel, per run (seed) and split the change from the first
    validation to the last with its 95% bootstrap interval; a line at 0 (no change)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(CHECKED), figsize=(4 * len(CHECKED), 3.6))
    for ax, figure in zip(axes, CHECKED, strict=True):
        for offset, (split, style) in zip((-0.1, 0.1), (("held_out", "o"), ("train", "s")), strict=True):
            points = [(i + offset, c) for i, run in enumerate(runs) for c in run.changes
                      if c.figure == figure and c.split == split]  # fmt: skip
            if points:
                x, changes = zip(*points, strict=True)
                low = [c.change - c.low for c in changes]
                high = [c.high - c.change for c in changes]
                ax.errorbar(x, [c.change for c in changes], yerr=[low, high], fmt=style, capsize=3,
                            label=SPLITS[split])  # fmt: skip
        ax.axhline(0, color="#888", linewidth=0.8)
        ax.set_xticks(range(len(runs)), [run.run for run in runs], fontsize=8)
        ax.set_title(f"{FIGURES[figure]}: after - before")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90, metadata={"Software": None})
    plt.close(fig)
    return path


def _checkpoint_rows(checkpoints: list[Checkpoint]) -> list[str]:
    head = ["run", "split", "step", "episodes", "dropped", *FIGURES.values()]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in checkpoints:
        split = SPLITS.get(c.split, c.split)
        if c.origin == "logged":  # no dumps: verl's means, the dropped episodes as a share
            cells = [c.run, f"{split} (verl's logged means)", str(c.step), "n/a", f"{_fmt(c.dropped)} of all"]
        else:
            cells = [c.run, split, str(c.step), str(c.episodes), _fmt(c.dropped)]
        rows.append("| " + " | ".join(cells + [_fmt(c.means[f]) for f in FIGURES]) + " |")
    return rows


def render_markdown(runs: list[RunLearning], steps: dict[str, list[StepMetrics]], figures: dict[str, str]) -> str:
    """`report.md`: the before/after table, the learning check per seed, the spread, and the per-step figures."""
    lines = ["# Agentic PPO: what the runs learned", ""]
    lines += [f"Runs (one seed each): {', '.join(r.run for r in runs)}. Figures are means over judged episodes; "
              "episodes dropped for our failure are counted, never scored. Valid tool-call rate: the share of the "
              "model's turns (but a last one without a call, the finish) whose tool calls the loop could parse; "
              "well-formed calls: the share of calls that also named a tool with valid arguments.", ""]  # fmt: skip
    lines += ["## Before and after training", ""]
    lines += _checkpoint_rows([c for run in runs for c in run.checkpoints]) + [""]
    lines += ["## The learning check, per seed", ""]
    lines += ["Change from the first validation (step 0, before any update) to the last, with a 95% bootstrap "
              "interval over episodes (resampled within each task); visible: the interval excludes 0.", ""]  # fmt: skip
    lines += ["| run | split | figure | before | after | change | 95% interval | visible |", "|---" * 8 + "|"]
    for run in runs:
        for c in run.changes:
            lines.append(
                f"| {c.run} | {SPLITS[c.split]} | {FIGURES[c.figure]} | {_fmt(c.before)} | {_fmt(c.after)} | "
                f"{c.change:+.3g} | [{c.low:+.3g}, {c.high:+.3g}] | {'yes' if c.visible else 'no'} |"
            )
    if not any(run.changes for run in runs):
        lines.append("| (no run has two validations of a split: nothing to compare) | | | | | | | |")
    lines += ["", "## Across seeds (the per-seed changes; episodes are never pooled across seeds)", ""]
    lines += ["| split | figure | seeds | mean change | sd | min | max | seeds with a visible rise |", "|---" * 8 + "|"]
    for row in spread(runs):
        lines.append(
            f"| {SPLITS[row['split']]} | {FIGURES[row['figure']]} | {row['seeds']} | {row['mean']:+.3g} | "
            f"{_fmt(row['sd'])} | {row['min']:+.3g} | {row['max']:+.3g} | {row['rises']} |"
        )
    if "learning" in figures:
        lines += ["", f"![the change per seed, with its 95% interval]({figures['learning']})"]
    for run, run_steps in steps.items():
        lines += ["", f"## Per step: {run}", ""]
        if run in figures:
            lines += [f"![{run}]({figures[run]})", ""]
        lines += _step_rows(run_steps)
    return "\n".join(lines) + "\n"


def _step_rows(steps: list[StepMetrics]) -> list[str]:
    columns = ("judgements_fresh", "judgements_cached", "tool_checks", "entropy", "logprob_gap", "clipped_ratio",
               "rollout_s", "update_s", "step_s", "validation_s")  # fmt: skip
    rows = ["| step | " + " | ".join(c.replace("_", " ") for c in columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for s in steps:
        rows.append(f"| {s.step} | " + " | ".join(_fmt(getattr(s, c)) for c in columns) + " |")
    return rows


def report_runs(
    run_dirs: list[Path], out: Path, held_out: frozenset[str] = frozenset(HELD_OUT_REFS)
) -> tuple[Path, list[str]]:
    """Write the report of `run_dirs` (one per seed) under `out`: report.md, its PNGs, learning.json (the
    checkpoints, changes and spread) and episodes.jsonl (every dumped episode as an `EpisodeRecord`); each run's
    own steps.jsonl and report.html go in its folder, as `cuda-agent train report RUN` writes them.

    Returns:
        report.md, and the validation lines of verl's per-step metrics (`report.validation_lines`).

    Raises:
        ConfigError: two runs share a folder name, a run has neither metrics nor dumps, or a dump is unreadable.
    """
    names = [Path(r).resolve().name for r in run_dirs]
    if len(set(names)) != len(names):
        raise ConfigError(f"runs are named by their folders, and these repeat: {', '.join(names)}")
    out.mkdir(parents=True, exist_ok=True)
    steps, learned, episodes, validation = {}, [], [], []
    figures: dict[str, str] = {}
    for run_dir, name in zip(map(Path, run_dirs), names, strict=True):
        records = read_dumps(run_dir, held_out)
        logged = logged_steps(metrics_files(run_dir)) if metrics_files(run_dir) else None
        if logged is None and not records:
            raise ConfigError(f"{run_dir}: no metrics.<n>.jsonl and no verl dumps (<step>.jsonl)")
        if logged is not None:
            validation += [f"{name}: {line}" for line in report_run(run_dir)[2]]
            steps[name] = [step_metrics(step, data) for step, data in logged.items()]
            if any(_trained(s) for s in steps[name]):
                figures[name] = step_figure(steps[name], f"{name}: per step", out / f"steps_{name}.png").name
        episodes += records
        learning = run_learning(records) if records else RunLearning(run=name, checkpoints=[], changes=[])
        if not learning.checkpoints and logged:  # no validation dumps: verl's logged means, without intervals
            learning.checkpoints = logged_checkpoints(name, logged)
        learned.append(learning)
    if any(run.changes for run in learned):
        figures["learning"] = learning_figure(learned, out / "learning.png").name
    _write_records(out, learned, episodes)
    page = out / "report.md"
    page.write_text(render_markdown(learned, steps, figures))
    return page, validation


def _write_records(out: Path, runs: list[RunLearning], episodes: list[EpisodeRecord]) -> None:
    data = {"runs": [run.model_dump(mode="json") for run in runs], "spread": spread(runs)}
    (out / "learning.json").write_text(json.dumps(data, indent=1) + "\n")
    (out / "episodes.jsonl").write_text("".join(e.model_dump_json() + "\n" for e in episodes))
