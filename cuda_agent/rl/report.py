"""A training run's per-step metrics (JSONL) and its HTML report with the reward curve.

verl's trainer logs every step through its tracking backends (`trainer.logger`); the recipes turn on
verl's own `file` backend, which appends `{"step": N, "data": {...all of verl's metrics...}}` per
step to `$VERL_FILE_LOGGER_PATH`. That backend opens its file for writing (a resumed run would
truncate it), so every launch (`cuda-agent train STAGE --out DIR`, and each stage of `train all`) gets a file
of its own, `DIR/metrics.<n>.jsonl`; reading them in order, the last line of a step wins (a resumed run
repeats no step, but a killed one can have logged the step it was killed after).

`step_metrics` picks what a reader of a run wants from verl's names into `StepMetrics`, one line
per step in `steps.jsonl`; `render_report` draws the reward curve (mean and max per step, pass
rate) and the table.

    cuda-agent train report runs/train/single_turn      # the --out of `train single-turn`: steps.jsonl, report.html
"""

from __future__ import annotations

import html
import io
import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.errors import ConfigError

_METRICS_NAME = re.compile(r"metrics(?:\.(\d+))?\.jsonl")

_OURS = "timing_s/cuda_agent/"  # CudaAgentLoopManager's episode metrics, logged inside verl's timing dict
FIELDS: dict[str, tuple[str, ...]] = {
    # our name: verl's keys, first present wins
    "reward_mean": (f"{_OURS}reward/mean", "critic/score/mean"),
    "reward_max": (f"{_OURS}reward/max", "critic/score/max"),
    "pass_rate": (f"{_OURS}pass_rate",),
    "faster_than_compile_rate": (f"{_OURS}faster_than_compile_rate",),
    "our_failures": (f"{_OURS}our_failures",),
    "verdict_cached_rate": (f"{_OURS}verdict_cached_rate",),
    "turns_mean": (f"{_OURS}turns/mean", "num_turns/mean"),
    "tokens_mean": ("response_length/mean",),
    "judge_s_mean": (f"{_OURS}judge_s/mean",),
    "actor_loss": ("actor/pg_loss",),
    "critic_loss": ("critic/vf_loss",),
    "kl": ("actor/ppo_kl",),
    "actor_grad_norm": ("actor/grad_norm",),
    "critic_grad_norm": ("critic/grad_norm",),
    "sft_loss": ("train/loss",),
    "entropy": ("actor/entropy",),
    "logprob_gap": ("rollout_corr/log_ppl_abs_diff",),
    "logprob_kl": ("rollout_corr/kl",),
    "probs_diff_max": ("training/rollout_probs_diff_max",),
    "clipped_ratio": (f"{_OURS}clipped_ratio", "response_length/clip_ratio"),
    "judgements_fresh": (f"{_OURS}judgements/fresh",),
    "judgements_cached": (f"{_OURS}judgements/cached",),
    "tool_checks": (f"{_OURS}judgements/tool_checks",),
    "verified_rate": (f"{_OURS}verified_before_finish_rate",),
    "tool_call_turn_rate": (f"{_OURS}tool_call_turn_rate",),
    "model_s_mean": (f"{_OURS}model_s/mean",),
    "tools_s_mean": (f"{_OURS}tools_s/mean",),
    "rollout_s": ("timing_s/gen",),
    "reward_s": ("timing_s/reward",),
    "step_s": ("timing_s/step",),
    "validation_s": ("timing_s/testing",),
}
_UPDATE_KEYS = ("timing_s/update_actor", "timing_s/update_critic")
# Between the rollout and the update: the actor's, the reference's and the critic's passes over the batch, GAE.
_PREPARE_KEYS = ("timing_s/old_log_prob", "timing_s/ref", "timing_s/values", "timing_s/adv")
_VALIDATION = re.compile(r"val-core/(?P<source>.+)/reward/mean@(?P<n>\d+)")


class ValidationMetrics(BaseModel):
    """One data source's validation figures at a step (verl's `_validate`, also the collect stage's pass)."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(description="The rows' data_source, e.g. kernelbench/L1.")
    samples: int = Field(description="Answers per task (N of verl's mean@N).")
    reward_mean: float = Field(description="verl's mean@N reward: dropped samples (our failures) count as 0 in it.")
    our_failure_rate: float | None = Field(
        default=None, description="Share of those samples dropped for our failure (val-aux/<source>/our_failure)."
    )
    judged_reward_mean: float | None = Field(
        default=None,
        description="Mean reward of the judged samples alone (dropped ones out); None if all were dropped or the "
        "dropped share was not logged.",
    )


class StepMetrics(BaseModel):
    """One training step, as `steps.jsonl` holds it (None: the stage does not log it)."""

    model_config = ConfigDict(extra="forbid")

    step: int = Field(description="verl's global step.")
    reward_mean: float | None = Field(default=None, description="Mean reward of the step's samples (dropped ones out).")
    reward_max: float | None = Field(default=None, description="Best reward of the step.")
    pass_rate: float | None = Field(default=None, description="Share of samples the judge passed.")
    faster_than_compile_rate: float | None = Field(default=None, description="Share >5% faster than torch.compile.")
    our_failures: float | None = Field(default=None, description="Samples dropped for our failure (never scored).")
    verdict_cached_rate: float | None = Field(default=None, description="Share judged from the verdict cache.")
    turns_mean: float | None = Field(default=None, description="Model turns per episode.")
    tokens_mean: float | None = Field(default=None, description="Response tokens per episode.")
    judge_s_mean: float | None = Field(default=None, description="Judge latency per episode, seconds.")
    actor_loss: float | None = Field(default=None, description="Actor's policy-gradient loss.")
    critic_loss: float | None = Field(default=None, description="Critic's value loss.")
    kl: float | None = Field(default=None, description="KL between the update's policy and the rollout's (PPO).")
    actor_grad_norm: float | None = Field(default=None, description="Actor gradient norm.")
    critic_grad_norm: float | None = Field(default=None, description="Critic gradient norm.")
    sft_loss: float | None = Field(default=None, description="SFT loss (the rft stage).")
    entropy: float | None = Field(default=None, description="The policy's entropy per token (verl's actor/entropy).")
    logprob_gap: float | None = Field(
        default=None,
        description="Rollout vs actor: mean over episodes of |log-perplexity difference|, i.e. the mean per-token "
        "log-prob gap (rollout_corr/log_ppl_abs_diff).",
    )
    logprob_kl: float | None = Field(
        default=None, description="Rollout vs actor: mean per-token log-prob difference (rollout_corr/kl)."
    )
    probs_diff_max: float | None = Field(
        default=None, description="Rollout vs actor: largest probability difference on a token (verl's debug check)."
    )
    clipped_ratio: float | None = Field(default=None, description="Share of episodes cut by their length.")
    judgements_fresh: float | None = Field(default=None, description="The step's final judgements made afresh.")
    judgements_cached: float | None = Field(default=None, description="The step's final judgements from the cache.")
    tool_checks: float | None = Field(default=None, description="Verification and profiling runs of the episodes.")
    verified_rate: float | None = Field(default=None, description="Share of episodes verified before finishing.")
    tool_call_turn_rate: float | None = Field(default=None, description="Share of turns with parsed tool calls.")
    model_s_mean: float | None = Field(default=None, description="An episode's seconds waiting for the model.")
    tools_s_mean: float | None = Field(default=None, description="An episode's seconds in its tools (builds, checks).")
    rollout_s: float | None = Field(default=None, description="Seconds generating (and, in the agent loop, judging).")
    reward_s: float | None = Field(default=None, description="Seconds computing rewards outside the rollout.")
    prepare_s: float | None = Field(
        default=None, description="Seconds for the actor's, reference's and critic's passes over the batch and GAE."
    )
    update_s: float | None = Field(default=None, description="Seconds updating actor and critic.")
    step_s: float | None = Field(default=None, description="Seconds for the whole step.")
    validation_s: float | None = Field(
        default=None, description="Seconds of the validation after the step, if any (outside step_s)."
    )
    validation: list[ValidationMetrics] = Field(default_factory=list, description="Validation at this step, if any.")


def step_metrics(step: int, data: dict[str, Any]) -> StepMetrics:
    """Our fields from one step of verl's metrics (`data` as verl's file logger writes it)."""
    values: dict[str, Any] = {"step": step}
    for name, keys in FIELDS.items():
        found = next((data[k] for k in keys if isinstance(data.get(k), int | float)), None)
        values[name] = None if found is None else float(found)
    for name, keys in (("update_s", _UPDATE_KEYS), ("prepare_s", _PREPARE_KEYS)):
        parts = [float(data[k]) for k in keys if isinstance(data.get(k), int | float)]
        values[name] = sum(parts) if parts else None
    values["validation"] = [
        _validation(
            m["source"], int(m["n"]), float(value), data.get(f"val-aux/{m['source']}/our_failure/mean@{m['n']}")
        )
        for key, value in data.items()
        if (m := _VALIDATION.fullmatch(key)) and isinstance(value, int | float)
    ]
    return StepMetrics(**values)


def _validation(source: str, samples: int, reward_mean: float, dropped: float | None) -> ValidationMetrics:
    # verl averages each task's N samples, then the tasks, with a dropped sample scored 0. Every task has N
    # samples, so both means are sums over all samples / (tasks x N), and the judged samples' own mean is
    # the reward mean over the share that was judged.
    judged = None if dropped is None or dropped >= 1 else reward_mean / (1 - dropped)
    return ValidationMetrics(
        source=source, samples=samples, reward_mean=reward_mean, our_failure_rate=dropped, judged_reward_mean=judged
    )


def read_steps(paths: list[Path]) -> list[StepMetrics]:
    """Every step in verl file-logger JSONL files, read in order (the last line of a step wins), by step.

    Raises:
        ConfigError: no file, or a line that is not verl's `{"step": N, "data": {...}}` (says which).
    """
    return [step_metrics(step, data) for step, data in logged_steps(paths).items()]


def logged_steps(paths: list[Path]) -> dict[int, dict[str, Any]]:
    """verl's metrics of every step (`data` of its file-logger lines), read in order, the last line of a step winning.

    Raises:
        ConfigError: no file, or a line that is not verl's `{"step": N, "data": {...}}` (says which).
    """
    if not paths:
        raise ConfigError("no metrics JSONL: was the stage run with trainer.logger=[console,file]?")
    by_step: dict[int, dict[str, Any]] = {}
    for path in paths:
        for number, line in enumerate(Path(path).read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                step, data = int(record["step"]), record["data"]
                step_metrics(step, data)  # a line whose data are not verl's fails here, with its place
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise ConfigError(f"{path}:{number} is not a verl file-logger line ({exc})") from exc
            by_step[step] = data
    return {step: by_step[step] for step in sorted(by_step)}


def write_steps(steps: list[StepMetrics], out: Path) -> Path:
    """`steps.jsonl`: one line per step, every field (null where the stage does not log it)."""
    out.write_text("".join(step.model_dump_json() + "\n" for step in steps))
    return out


def _svg_reward_curve(steps: list[StepMetrics], title: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "cuda-agent"  # fixed element ids: one run renders one page
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    x = [s.step for s in steps]
    for name, style in (("reward_mean", "-o"), ("reward_max", ":")):
        points = [(s.step, getattr(s, name)) for s in steps if getattr(s, name) is not None]
        if points:
            ax.plot(*zip(*points, strict=True), style, label=name.replace("_", " "), markersize=3)
    from matplotlib.ticker import MaxNLocator

    ax.set_xlabel("step")
    ax.set_ylabel("reward")
    ax.set_xlim(min(x, default=0), max(x, default=1))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers: no tick at 1.2
    passed = [(s.step, s.pass_rate) for s in steps if s.pass_rate is not None]
    if passed:
        share = ax.twinx()
        share.plot(*zip(*passed, strict=True), "--", color="#2e7d32", label="pass rate")
        share.set_ylim(0, 1)
        share.set_ylabel("pass rate")
        share.legend(loc="lower right")
    ax.legend(loc="upper left")
    ax.set_title(title)
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]


STYLE = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:13px}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}
th{background:#f3f3f3}svg{max-width:100%;height:auto}h2{font-size:16px;margin-top:1.5em}"""

# The step table in groups a reader takes in at once, each a table of a few columns (one table of every
# field ran past a 2,000 px window); a field not in any group lands in the last.
GROUPS: dict[str, tuple[str, ...]] = {
    "Outcome": (
        "reward_mean",
        "reward_max",
        "pass_rate",
        "faster_than_compile_rate",
        "our_failures",
        "verdict_cached_rate",
    ),
    "Episodes": ("turns_mean", "tokens_mean", "clipped_ratio", "verified_rate", "tool_call_turn_rate"),
    "Judging, and an episode's seconds": (
        "judgements_fresh",
        "judgements_cached",
        "tool_checks",
        "judge_s_mean",
        "model_s_mean",
        "tools_s_mean",
    ),
    "Optimisation": ("actor_loss", "critic_loss", "kl", "actor_grad_norm", "critic_grad_norm", "sft_loss"),
    "Policy": ("entropy", "logprob_gap", "logprob_kl", "probs_diff_max"),
    "Time (s)": ("rollout_s", "reward_s", "prepare_s", "update_s", "step_s", "validation_s"),
}


def _cell(value: Any) -> str:
    return "" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)


def _tables(steps: list[StepMetrics]) -> str:
    """One table per group of `GROUPS`, with the step first and only the columns some step has."""
    logged = [
        n
        for n in StepMetrics.model_fields
        if n not in ("step", "validation") and any(getattr(s, n) is not None for s in steps)
    ]
    grouped = {title: [n for n in names if n in logged] for title, names in GROUPS.items()}
    rest = [n for n in logged if not any(n in names for names in GROUPS.values())]
    if rest:
        grouped["Other"] = rest
    out = []
    for title, columns in grouped.items():
        if not columns:
            continue
        columns = ["step", *columns]
        head = "".join(f"<th>{html.escape(c.replace('_', ' '))}</th>" for c in columns)
        rows = "".join("<tr>" + "".join(f"<td>{_cell(getattr(s, c))}</td>" for c in columns) + "</tr>" for s in steps)
        out.append(f"<h2>{html.escape(title)}</h2><table><tr>{head}</tr>{rows}</table>")
    return "".join(out)


def render_report(steps: list[StepMetrics], title: str) -> str:
    """The run's HTML page: the reward curve (when the stage has rewards), then the steps' metrics in groups."""
    rewarded = any(s.reward_mean is not None for s in steps)
    curve = _svg_reward_curve(steps, title) if rewarded else ""
    count = f"{len(steps)} step{'' if len(steps) == 1 else 's'}."
    note = " Dropped samples (our failures) are not in the rewards." if rewarded else ""
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>{curve}"
        f"<p>{count}{note}</p>{_tables(steps)}"
        + "".join(f"<p>{html.escape(line)}</p>" for line in validation_lines(steps))
        + "</body></html>\n"
    )


def validation_lines(steps: list[StepMetrics]) -> list[str]:
    """One line per step and data source validated: verl's mean reward, the judged samples' own, the share dropped."""
    return [
        f"validation at step {step.step}, {v.source}: reward mean@{v.samples} {v.reward_mean:.4g}, our failures "
        + ("not logged" if v.our_failure_rate is None else f"{v.our_failure_rate:.4g}")
        + " (verl counts them as reward 0 in the mean); judged samples' mean "
        + ("unknown" if v.judged_reward_mean is None else f"{v.judged_reward_mean:.4g}")
        for step in steps
        for v in step.validation
    ]


def report_run(run_dir: Path) -> tuple[Path, Path, list[str]]:
    """Read every `metrics*.jsonl` under `run_dir` (in launch order), write `steps.jsonl` and `report.html` there.

    Returns:
        The two files, and `validation_lines` of the run.

    Raises:
        ConfigError: no metrics file under `run_dir`, or an unreadable one.
    """
    paths = metrics_files(run_dir)
    steps = read_steps(paths)
    out = write_steps(steps, Path(run_dir) / "steps.jsonl")
    page = Path(run_dir) / "report.html"
    page.write_text(render_report(steps, f"cuda-agent training: {Path(run_dir).resolve().name}"))
    return out, page, validation_lines(steps)


def launch_number(path: Path) -> int | None:
    """The launch a metrics file belongs to: n of `metrics.<n>.jsonl`, -1 for `metrics.jsonl`, None for no metrics file.

    `recipes.metrics_file` names each launch's file by this rule; a lone `metrics.jsonl` is one set by hand
    (`VERL_FILE_LOGGER_PATH`) and is read first.
    """
    match = _METRICS_NAME.fullmatch(path.name)
    return None if match is None else int(match.group(1) or -1)


def metrics_files(run_dir: Path) -> list[Path]:
    """The metrics files under `run_dir` in launch order (metrics.10.jsonl after metrics.9.jsonl)."""
    found = [(n, path) for path in Path(run_dir).glob("metrics*.jsonl") if (n := launch_number(path)) is not None]
    return [path for _, path in sorted(found)]


class LearningCheck(BaseModel):
    """Is learning visible: the last steps' mean reward against the first steps', over seeds."""

    first_mean: float = Field(description="Mean reward of the first `window` steps, pooled over seeds.")
    last_mean: float = Field(description="Mean reward of the last `window` steps, pooled over seeds.")
    standard_error: float = Field(description="Standard error of the difference (step means as samples).")
    sigmas: float = Field(description="(last - first) / standard_error.")
    runs: int = Field(description="Seeds (runs) pooled.")
    visible: bool = Field(description="last - first > 3 standard errors.")


def learning_check(runs: list[list[StepMetrics]], window: int = 5) -> LearningCheck:
    """Compare the mean reward of the last `window` steps with the first `window`, pooling the runs' step means.

    Raises:
        ConfigError: a run has fewer than 2 * `window` steps with a reward.
    """
    import statistics

    first, last = [], []
    for steps in runs:
        rewards = [s.reward_mean for s in steps if s.reward_mean is not None]
        if len(rewards) < 2 * window:
            raise ConfigError(f"a run has {len(rewards)} steps with a reward; the check needs {2 * window}")
        first += rewards[:window]
        last += rewards[-window:]
    se = (statistics.variance(first) / len(first) + statistics.variance(last) / len(last)) ** 0.5
    gain = statistics.mean(last) - statistics.mean(first)
    sigmas = gain / se if se > 0 else (float("inf") if gain > 0 else 0.0)
    return LearningCheck(
        first_mean=statistics.mean(first),
        last_mean=statistics.mean(last),
        standard_error=se,
        sigmas=sigmas,
        runs=len(runs),
        visible=sigmas > 3,
    )


def main(argv: list[str] | None = None) -> int:
    """`python -m cuda_agent.rl.report --learning steps.jsonl ...`: the learning check over runs (exit 1 if not visible)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--learning", nargs="+", type=Path, required=True, help="one steps.jsonl per seed")
    parser.add_argument("--window", type=int, default=5)
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.learning if not p.is_file()]
    if missing:
        parser.error(f"no steps.jsonl at {', '.join(missing)}: give the files `cuda-agent train report RUN` wrote")
    runs = [
        [StepMetrics.model_validate_json(line) for line in p.read_text().splitlines() if line] for p in args.learning
    ]
    check = learning_check(runs, args.window)
    print(check.model_dump_json(indent=2))
    return 0 if check.visible else 1


if __name__ == "__main__":
    raise SystemExit(main())
