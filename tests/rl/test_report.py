"""Per-step metrics from verl's own `file` tracking backend, and the run's HTML report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cuda_agent.cli import main
from cuda_agent.errors import ConfigError
from cuda_agent.rl.report import read_steps, report_run

STEP = {
    "timing_s/cuda_agent/reward/mean": 1.5,
    "timing_s/cuda_agent/reward/max": 3.0,
    "critic/score/mean": 1.0,  # verl's own: dropped samples count as 0 there, so ours wins
    "timing_s/cuda_agent/pass_rate": 0.75,
    "timing_s/cuda_agent/our_failures": 1.0,
    "timing_s/cuda_agent/judge_s/mean": 4.0,
    "response_length/mean": 600.0,
    "num_turns/mean": 2.0,
    "actor/pg_loss": -0.1,
    "critic/vf_loss": 0.5,
    "actor/ppo_kl": 0.01,
    "actor/grad_norm": 2.0,
    "critic/grad_norm": 3.0,
    "timing_s/gen": 10.0,
    "timing_s/reward": 1.0,
    "timing_s/update_actor": 2.0,
    "timing_s/update_critic": 0.5,
    "timing_s/step": 14.0,
}


def test_verls_file_logger_lines_become_one_record_per_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("verl", reason="verl is not installed (pip install -e '.[rl]')")
    from verl.utils.tracking import Tracking

    first, resumed = tmp_path / "metrics.0.jsonl", tmp_path / "metrics.1.jsonl"
    for path, steps in ((first, (1, 2)), (resumed, (2, 3))):  # killed after logging step 2; resumed at 2
        monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(path))
        tracking = Tracking("cuda-agent", "test", default_backend=["file"])
        for step in steps:
            tracking.log({**STEP, "timing_s/cuda_agent/reward/mean": float(step + 10 * (path == resumed))}, step)
        tracking.finish()
    steps = read_steps([first, resumed])
    assert [s.step for s in steps] == [1, 2, 3] and [s.reward_mean for s in steps] == [1.0, 12.0, 13.0]
    step = steps[0]
    assert (step.reward_max, step.pass_rate, step.our_failures, step.judge_s_mean) == (3.0, 0.75, 1.0, 4.0)
    assert (step.tokens_mean, step.turns_mean, step.actor_loss, step.critic_loss, step.kl) == (
        600.0,
        2.0,
        -0.1,
        0.5,
        0.01,
    )
    assert (step.actor_grad_norm, step.critic_grad_norm) == (2.0, 3.0)
    assert (step.rollout_s, step.reward_s, step.update_s, step.step_s) == (10.0, 1.0, 2.5, 14.0)


def test_report_command_writes_steps_and_a_page_with_the_reward_curve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    lines = [json.dumps({"step": s, "data": {**STEP, "timing_s/cuda_agent/reward/mean": s / 10}}) for s in range(1, 6)]
    (tmp_path / "metrics.0.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["train", "report", str(tmp_path)]) == 0
    assert "report.html" in capsys.readouterr().out
    records = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5] and records[4]["reward_mean"] == 0.5
    assert records[0]["sft_loss"] is None  # every field on every line
    page = (tmp_path / "report.html").read_text()
    assert "<svg" in page and "reward mean" in page and "5 steps." in page
    tables = page.split("<table>")[1:]
    # outcome, episodes, judging, optimisation, time
    assert len(tables) == 5 and all(t.count("<tr>") == 6 for t in tables)
    assert max(t.split("</tr>")[0].count("<th>") for t in tables) <= 7  # no table runs off the window
    x_axis = page.split("<svg")[1].split("<!-- step -->")[0]  # matplotlib draws the x ticks, then their label
    assert re.findall(r"<!-- (\S+) -->", x_axis) == ["1", "2", "3", "4", "5"]  # whole steps, not 1.0, 1.5


def test_a_stage_without_rewards_says_nothing_of_rewards(tmp_path: Path) -> None:
    """The rft stage logs an SFT loss alone: no curve, no word of rewards; one step is "1 step"."""
    (tmp_path / "metrics.0.jsonl").write_text(json.dumps({"step": 1, "data": {"train/loss": 0.7}}) + "\n")
    assert main(["train", "report", str(tmp_path)]) == 0
    body = (tmp_path / "report.html").read_text().split("</h1>")[1]
    assert "<svg" not in body and "reward" not in body.lower() and "1 step." in body and "sft loss" in body


def test_report_prints_validation_means_beside_their_dropped_share(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """verl's validation mean scores our failures as 0: the report shows how many there were."""
    pytest.importorskip("matplotlib")
    val = {"val-core/kernelbench/L1/reward/mean@4": -0.5, "val-aux/kernelbench/L1/our_failure/mean@4": 0.25}
    lines = [{"step": 1, "data": STEP}, {"step": 2, "data": {**STEP, **val}}]
    (tmp_path / "metrics.0.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert main(["train", "report", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "validation at step 2, kernelbench/L1: reward mean@4 -0.5, our failures 0.25" in out
    assert "judged samples' mean -0.6667" in out  # -0.5 over the 3 in 4 that were judged
    assert "step 1" not in out
    assert "our failures 0.25" in (tmp_path / "report.html").read_text()


def test_validation_judged_mean_leaves_dropped_samples_out_of_verls_mean() -> None:
    """Through verl's own validation aggregation: dropped samples spread unevenly over the tasks."""
    pytest.importorskip("verl", reason="verl is not installed (pip install -e '.[rl]')")
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    from cuda_agent.rl.metrics import dropped_fields, judged_fields
    from cuda_agent.rl.report import step_metrics

    drop = None  # a sample we failed to judge
    scores = {"a": [3, drop, -1, 1], "b": [2, 2, drop, drop], "c": [-1, -1, -1, -1]}
    uids = [uid for uid, row in scores.items() for _ in row]
    infos = [
        dropped_fields("sandbox down") if r is None else judged_fields(None, r) for row in scores.values() for r in row
    ]
    columns = {key: [info[key] for info in infos] for key in infos[0]}
    columns["reward"] = [info["score"] for info in infos]  # verl's own list: a dropped sample's score, 0
    data = RayPPOTrainer._val_metrics_update(None, ["kernelbench/L1"] * len(uids), uids, columns, [])
    [validation] = step_metrics(1, data).validation
    judged = [r for row in scores.values() for r in row if r is not None]
    assert validation.our_failure_rate == pytest.approx(3 / 12)
    assert validation.reward_mean == pytest.approx(sum(judged) / 12)  # verl's: the dropped count as 0
    assert validation.judged_reward_mean == pytest.approx(sum(judged) / len(judged))


def test_no_metrics_is_an_error_that_says_what_to_turn_on(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="trainer.logger"):
        report_run(tmp_path)
    (tmp_path / "metrics.jsonl").write_text("not json\n")
    with pytest.raises(ConfigError, match="metrics.jsonl:1"):
        report_run(tmp_path)


def test_report_reads_launches_in_the_order_recipes_names_them(tmp_path: Path) -> None:
    from cuda_agent.rl.recipes import metrics_file
    from cuda_agent.rl.report import metrics_files

    for name, reward in (("metrics.10.jsonl", 10.0), ("metrics.9.jsonl", 9.0), ("metrics.jsonl", -1.0)):
        line = {"step": 1, "data": {"timing_s/cuda_agent/reward/mean": reward}}
        (tmp_path / name).write_text(json.dumps(line) + "\n")
    (tmp_path / "metrics.old.jsonl").write_text("a copy kept by hand, no launch's\n")
    assert [p.name for p in metrics_files(tmp_path)] == ["metrics.jsonl", "metrics.9.jsonl", "metrics.10.jsonl"]
    assert metrics_file(tmp_path) == (tmp_path / "metrics.11.jsonl").absolute()  # the launch after the report's last
    steps, _, _ = report_run(tmp_path)
    assert [json.loads(line)["reward_mean"] for line in steps.read_text().splitlines()] == [
        10.0
    ]  # the last launch wins


def test_learning_check_pools_seeds_and_needs_three_standard_errors() -> None:
    from cuda_agent.rl.report import StepMetrics, learning_check

    def run(rewards: list[float]) -> list[StepMetrics]:
        return [StepMetrics(step=i + 1, reward_mean=r) for i, r in enumerate(rewards)]

    rising = [1.0, 0.8, 1.2, 1.1, 0.9] + [1.5] * 20 + [2.9, 3.0, 2.8, 3.0, 2.9]
    check = learning_check([run(rising), run(rising)])
    assert check.visible and check.runs == 2 and check.last_mean - check.first_mean == pytest.approx(1.92)
    flat = [1.0, 1.4, 0.6, 1.2, 0.8] * 6
    assert not learning_check([run(flat), run(flat)]).visible
    with pytest.raises(ConfigError, match="needs 10"):
        learning_check([run([1.0] * 9)])


def test_learning_check_command_reads_seeds_and_says_which_file_is_missing(tmp_path: Path, capsys) -> None:
    from cuda_agent.rl.report import StepMetrics, main

    rewards = [0.9, 1.0, 1.1, 1.0, 0.9] + [2.0] * 5 + [3.0, 2.9, 3.0, 3.0, 2.9]
    steps = tmp_path / "steps.jsonl"
    steps.write_text(
        "".join(StepMetrics(step=i + 1, reward_mean=r).model_dump_json() + "\n" for i, r in enumerate(rewards))
    )
    assert main(["--learning", str(steps)]) == 0
    assert '"visible": true' in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        main(["--learning", str(steps), str(tmp_path / "seed1" / "steps.jsonl")])
    assert exit_info.value.code == 2
    assert "no steps.jsonl at " + str(tmp_path / "seed1" / "steps.jsonl") in capsys.readouterr().err
