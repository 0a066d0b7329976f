"""The before/after report of PPO runs, over dumps written by verl's own writer and metrics by verl's own logger.

Two synthetic runs (seeds) of a 3-step agentic PPO on four curriculum tasks (two held out): validation at step 0
and step 3 (4 episodes a task), training rollouts at steps 1-3, per-step metrics as verl's `file` backend logs
them with the agent-loop manager's `cuda_agent/*` keys.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.cli import main
from cuda_agent.rl.learning import EpisodeRecord, bootstrap_change, read_dumps, run_learning, spread
from cuda_agent.rl.learning_report import time_split
from cuda_agent.rl.report import step_metrics

HELD_OUT = ("agentic/clamp", "agentic/swish")
TRAIN = ("agentic/relu", "agentic/square")


def _episode(task: str, passed: bool, verified: bool, dropped: bool = False) -> dict:
    # The agent loop's reward_extra_info (cuda_agent.rl.rollout.reward_extra_info), as verl carries it.
    return {
        "score": 0.0 if dropped else (1.0 if passed else -1.0),
        "verdict": "dropped" if dropped else ("pass" if passed else "incorrect"),
        "passed": float(passed and not dropped),
        "faster_than_eager": 0.0,
        "faster_than_compile": 0.0,
        "speedup_vs_compile": None,
        "our_failure": float(dropped),
        "cached": 0.0,
        "turns": 9.0,
        "clipped": 0.0,
        "judge_s": 3.0,
        "verified": float(verified),
        "valid_tool_calls": 1.0,
        "tool_call_turns": 1.0 if verified else 0.5,
        "response_tokens": 3000.0,
        "judgements": 1.0,
        "cached_judgements": 0.0,
        "tool_checks": 1.0,
        "model_s": 5.0,
        "tools_s": 20.0,
    }


def _dump(folder: Path, step: int, episodes: list[tuple[str, dict]], validation: bool) -> None:
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    infos = {key: [info[key] for _, info in episodes] for key in episodes[0][1]}
    if validation:  # verl's _validate adds the scores as `reward` before the samples' own keys
        infos = {"reward": infos["score"], **infos}
    else:  # _log_rollout_data adds the request ids
        infos["request_id"] = [f"r{i}" for i in range(len(episodes))]
    RayPPOTrainer._write_generations(
        inputs=["<prompt>"] * len(episodes),
        outputs=["<response>"] * len(episodes),
        gts=[task for task, _ in episodes],
        scores=[info["score"] for _, info in episodes],
        reward_extra_infos_dict=infos,
        dump_path=str(folder),
        global_steps=step,
    )


def _metrics(path: Path, monkeypatch: pytest.MonkeyPatch, steps: int) -> None:
    from verl.utils.tracking import Tracking

    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(path))
    tracking = Tracking("cuda-agent", "test", default_backend=["file"])
    tracking.log({"val-core/agentic/held_out/reward/mean@4": -1.0}, 0)
    for step in range(1, steps + 1):
        tracking.log(
            {
                "timing_s/cuda_agent/reward/mean": 0.5 * step,
                "timing_s/cuda_agent/judgements/fresh": 14.0,
                "timing_s/cuda_agent/judgements/cached": 2.0,
                "timing_s/cuda_agent/judgements/tool_checks": 20.0,
                "timing_s/cuda_agent/clipped_ratio": 0.125,
                "timing_s/cuda_agent/model_s/mean": 2.0,
                "timing_s/cuda_agent/tools_s/mean": 6.0,
                "timing_s/cuda_agent/judge_s/mean": 2.0,
                "actor/entropy": 1.5 - 0.1 * step,
                "rollout_corr/log_ppl_abs_diff": 1e-4,
                "rollout_corr/kl": 2e-5,
                "training/rollout_probs_diff_max": 3e-3,
                "timing_s/gen": 10.0,
                "timing_s/reward": 1.0,
                "timing_s/old_log_prob": 0.5,
                "timing_s/values": 0.5,
                "timing_s/adv": 0.5,
                "timing_s/update_actor": 2.0,
                "timing_s/update_critic": 0.5,
                "timing_s/step": 16.0,
            },
            step,
        )
    tracking.finish()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two seeds. Held-out: pass 0/8 -> 8/8 (seed 0), 0/8 -> 4/8 (seed 1); training tasks 4/8 -> 8/8 in both;
    verified 0 -> 1; one episode of seed 0's last validation dropped for our failure."""
    pytest.importorskip("verl", reason="verl writes the dumps (pip install -e '.[rl]')")
    monkeypatch = pytest.MonkeyPatch()
    root = tmp_path_factory.mktemp("runs")
    out = []
    for seed, after_held_out in ((0, 4), (1, 2)):
        run = root / f"ppo_s{seed}"
        before = [(t, _episode(t, False, False)) for t in HELD_OUT for _ in range(4)]
        before += [(t, _episode(t, k < 2, False)) for t in TRAIN for k in range(4)]
        after = [(t, _episode(t, k < after_held_out, True)) for t in HELD_OUT for k in range(4)]
        after += [(t, _episode(t, True, True)) for t in TRAIN for _ in range(4)]
        if seed == 0:
            after.append(("agentic/relu", _episode("agentic/relu", False, False, dropped=True)))
        _dump(run / "validation_data", 0, before, validation=True)
        _dump(run / "validation_data", 3, after, validation=True)
        for step in (1, 2, 3):
            _dump(run / "rollout_data", step, [(t, _episode(t, step > 1, step > 1)) for t in TRAIN], validation=False)
        _metrics(run / "metrics.0.jsonl", monkeypatch, steps=3)
        out.append(run)
    monkeypatch.undo()
    return out


def test_verls_dumps_become_one_record_per_episode_split_by_the_held_out_tasks(runs: list[Path]) -> None:
    records = read_dumps(runs[0], frozenset(HELD_OUT))
    validation = [r for r in records if r.kind == "validation"]
    assert len(validation) == 33 and len([r for r in records if r.kind == "rollout"]) == 6
    assert {r.split for r in validation if r.task in HELD_OUT} == {"held_out"}
    assert {r.split for r in validation if r.task in TRAIN} == {"train"}
    dropped = [r for r in validation if r.dropped]
    assert len(dropped) == 1 and dropped[0].step == 3 and dropped[0].reward == 0.0
    first = validation[0]
    assert (first.step, first.reward, first.passed, first.verified, first.turns, first.tokens) == (
        0, -1.0, 0.0, 0.0, 9.0, 3000.0
    )  # fmt: skip


def test_the_learning_check_is_per_seed_and_the_seeds_are_only_compared(runs: list[Path]) -> None:
    learned = [run_learning(read_dumps(run, frozenset(HELD_OUT))) for run in runs]
    seed0 = {(c.split, c.figure): c for c in learned[0].changes}
    held = seed0[("held_out", "passed")]
    assert (held.before, held.after, held.change) == (0.0, 1.0, 1.0) and held.visible
    assert (held.low, held.high) == (1.0, 1.0)  # every episode failed before and passed after: no spread
    train = seed0[("train", "passed")]
    assert (train.before, train.after) == (0.5, 1.0)  # the dropped episode is out, not a failure
    assert train.low <= train.change <= train.high
    steady = seed0[("held_out", "reward")]
    assert steady.change == 2.0
    checkpoints = {(c.split, c.step): c for c in learned[0].checkpoints}
    assert checkpoints[("train", 3)].dropped == 1 and checkpoints[("train", 3)].episodes == 8
    assert checkpoints[("held_out", 0)].means["verified"] == 0.0 and checkpoints[("held_out", 3)].tasks == 2
    rows = {(r["split"], r["figure"]): r for r in spread(learned)}
    held_spread = rows[("held_out", "passed")]
    assert held_spread["seeds"] == 2 and held_spread["mean"] == pytest.approx(0.75)  # (1.0 + 0.5) / 2, per seed
    assert (held_spread["min"], held_spread["max"]) == (0.5, 1.0) and held_spread["sd"] == pytest.approx(0.3536, 1e-3)


def _records(task_values: dict[str, list[float]], step: int) -> list[EpisodeRecord]:
    return [
        EpisodeRecord(
            run="r", kind="validation", step=step, task=task, split="train", dropped=False, reward=value, passed=value
        )  # fmt: skip
        for task, values in task_values.items()
        for value in values
    ]


def test_the_bootstrap_resamples_within_each_task() -> None:
    # Each task always fails or always passes: resampled within tasks, every draw has the same mean, so an
    # unchanged policy shows an interval of exactly 0 (pooled resampling would spread it).
    same = {"agentic/relu": [0.0, 0.0, 0.0], "agentic/square": [1.0, 1.0, 1.0]}
    assert bootstrap_change(_records(same, 0), _records(same, 3), "passed") == (0.5, 0.5, 0.0, 0.0)
    noisy = {"agentic/relu": [0.0, 1.0, 0.0, 1.0]}
    before, after, low, high = bootstrap_change(_records(noisy, 0), _records(noisy, 3), "passed")
    assert before == after == 0.5 and low < 0 < high
    assert bootstrap_change(_records(same, 0), [], "passed") is None


def test_a_steps_time_splits_the_rollout_by_the_episodes_own_seconds() -> None:
    step = step_metrics(
        1,
        {"timing_s/gen": 10.0, "timing_s/cuda_agent/model_s/mean": 2.0, "timing_s/cuda_agent/tools_s/mean": 6.0,
         "timing_s/cuda_agent/judge_s/mean": 2.0, "timing_s/reward": 1.0, "timing_s/old_log_prob": 0.5,
         "timing_s/values": 0.5, "timing_s/adv": 0.5, "timing_s/update_actor": 2.0, "timing_s/update_critic": 0.5,
         "timing_s/step": 17.0},
    )  # fmt: skip
    split = time_split(step)
    assert split == {
        "generation: model": 2.0,
        "generation: tools (builds, checks)": 6.0,
        "generation: final judgement": 2.0,
        "reward": 1.0,
        "log-probs, values, GAE": 1.5,
        "update (actor, critic)": 2.5,
        "other": 2.0,
    }


def test_the_report_command_writes_the_table_figures_and_records_over_seeds(
    runs: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "report"
    assert main(["train", "report", *map(str, runs), "--out", str(out), "--held-out", ",".join(HELD_OUT)]) == 0
    printed = capsys.readouterr().out
    assert "ppo_s0: validation at step 0, agentic/held_out" in printed and "report.md" in printed
    page = (out / "report.md").read_text()
    assert "| ppo_s0 | held-out tasks | 0 | 8 | 0 | 0 | -1 | 0 | 0.5 | 1 | 9 | 3,000 | 0 |" in page
    assert "| ppo_s0 | training tasks | 3 | 8 | 1 | 1 | 1 | 1 | 1 | 1 | 9 | 3,000 | 0 |" in page
    assert "| ppo_s1 | held-out tasks | pass rate | 0 | 0.5 | +0.5 |" in page
    assert "| held-out tasks | pass rate | 2 | +0.75 | 0.354 | +0.5 | +1 | 2 |" in page
    assert "| 1 | 14 | 2 | 20 | 1.4 | 0.0001 | 0.125 | 10 | 2.5 | 16 | n/a |" in page  # per step: judging ... time
    for name in ("steps_ppo_s0.png", "steps_ppo_s1.png", "learning.png"):
        assert (out / name).stat().st_size > 10_000 and f"]({name})" in page
    learning = json.loads((out / "learning.json").read_text())
    assert [run["run"] for run in learning["runs"]] == ["ppo_s0", "ppo_s1"]
    assert learning["runs"][0]["changes"][0] == {"run": "ppo_s0", "split": "held_out", "figure": "passed",
        "before": 0.0, "after": 1.0, "change": 1.0, "low": 1.0, "high": 1.0, "visible": True}  # fmt: skip
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 33 + 6 + 32 + 6
    assert all((run / "steps.jsonl").is_file() and (run / "report.html").is_file() for run in runs)
    steps = [json.loads(line) for line in (runs[0] / "steps.jsonl").read_text().splitlines()]
    assert steps[1]["entropy"] == pytest.approx(1.4) and steps[1]["judgements_fresh"] == 14.0
    assert steps[1]["prepare_s"] == 1.5 and steps[1]["logprob_gap"] == 1e-4


def test_several_runs_need_an_out_folder(runs: list[Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "report", *map(str, runs)]) == 2
    assert "--out" in capsys.readouterr().err


def test_a_dump_is_told_a_validations_or_a_training_steps_by_verls_own_keys(runs: list[Path], tmp_path: Path) -> None:
    # Wherever the run pointed verl: validation lines carry verl's `reward`, a training step's do not.
    for source, target in (("validation_data/3.jsonl", "val/3.jsonl"), ("rollout_data/2.jsonl", "gen/2.jsonl")):
        (tmp_path / target).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / target).write_text((runs[0] / source).read_text())
    records = read_dumps(tmp_path, frozenset(HELD_OUT))
    assert [(r.kind, r.step) for r in records] == [("rollout", 2)] * 2 + [("validation", 3)] * 17


def test_a_dump_line_that_is_not_verls_is_refused_with_its_place(tmp_path: Path) -> None:
    from cuda_agent.errors import ConfigError

    (tmp_path / "validation_data").mkdir()
    (tmp_path / "validation_data" / "0.jsonl").write_text('{"input": "p", "output": "r"}\n')
    (tmp_path / "validation_data" / "notes.jsonl").write_text("not a dump: never read\n")
    with pytest.raises(ConfigError, match=r"validation_data/0.jsonl:1 is not a line of verl's generation dump"):
        read_dumps(tmp_path)


def test_a_run_stopped_before_its_first_step_has_its_report_without_figures(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    run = tmp_path / "ppo_s0"
    run.mkdir()
    (run / "metrics.0.jsonl").write_text(json.dumps({"step": 0, "data": {"val-core/agentic/reward/mean@1": -1.0}}))
    assert main(["train", "report", str(run)]) == 0
    page = (run / "report.md").read_text()
    assert "nothing to compare" in page and "## Per step: ppo_s0" in page and not list(run.glob("*.png"))


def test_a_run_without_dumps_has_its_before_and_after_from_verls_logged_means(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    run = tmp_path / "ppo"  # e.g. a run of a script that did not set trainer.validation_data_dir
    run.mkdir()
    lines = []
    for step, passed, verified in ((0, 0.0, 0.0), (4, 0.6, 0.3)):
        data = {"val-core/agentic/held_out/reward/mean@4": passed - 1.0,
                "val-aux/agentic/held_out/passed/mean@4": passed, "val-aux/agentic/held_out/verified/mean@4": verified,
                "val-aux/agentic/held_out/our_failure/mean@4": 0.25 if step else 0.0,
                "val-aux/agentic/held_out/turns/mean@4": 6.0}  # fmt: skip
        lines.append(json.dumps({"step": step, "data": data}))
    (run / "metrics.0.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["train", "report", str(run)]) == 0
    page = (run / "report.md").read_text()
    # the judged samples' means: a dropped sample (a quarter at step 4) logged 0 in every field
    assert "| ppo | held-out tasks (verl's logged means) | 0 | n/a | 0 of all | 0 | -1 | 0 | n/a | n/a | 6 |" in page
    assert "| ppo | held-out tasks (verl's logged means) | 4 | n/a | 0.25 of all | 0.8 | -0.533 | 0.4 | n/a |" in page
