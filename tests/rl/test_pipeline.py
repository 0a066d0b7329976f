"""`cuda-agent train all`: the stages in order, each one's artifact handed to the next, a manifest, and a resume.

The launcher here is a test double that leaves what verl's trainers leave (checkpoint folders with a Hugging
Face copy, the collect stage's episodes with their tokens, the file logger's metrics); launching verl itself is
tested by tests/rl/test_launch.py and bench/train_gpu.sh. Everything else is real: recipes composed against
verl, the checks, the RFT filter, the replay rows, the HF hand-off and the report.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from cuda_agent.errors import ConfigError

pytest.importorskip("verl", reason="verl is not installed (pip install -e '.[rl]')")

from cuda_agent.rl.curriculum import write_curriculum  # noqa: E402
from cuda_agent.rl.pipeline import ORDER, Pipeline, hf_folder, load_pipeline  # noqa: E402
from cuda_agent.rl.recipes import bundled_recipe, metrics_file  # noqa: E402

CPU = ["trainer.device=cpu", "trainer.n_gpus_per_node=1", "actor_rollout_ref.rollout.tensor_model_parallel_size=1"]
SMALL = [
    "data.train_batch_size=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "actor_rollout_ref.actor.ulysses_sequence_parallel_size=1",
    "critic.ulysses_sequence_parallel_size=1",
]


class VerlLeftovers:
    """Stands in for verl's trainers: writes what each stage leaves behind; fails agentic PPO's first launch."""

    def __init__(self, model_dir: Path) -> None:
        self.model_dir, self.calls = model_dir, []

    def __call__(self, plan: Any, resume: bool) -> int:
        stage, cfg = plan.recipe.stage, plan.config
        self.calls.append((stage, resume, plan.overrides))
        metrics = metrics_file(plan.out_dir)  # where recipes.launch points verl's file logger
        metrics.write_text(json.dumps({"step": 1, "data": {"critic/score/mean": 1.0}}) + "\n")
        if stage == "collect":
            [loop] = yaml.safe_load(Path(cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path).read_text())
            assert loop["save_tokens"] is True  # the pipeline asks for what rft-data and critic-data read
            self._episodes(Path(loop["work_dir"]))
            return 0
        if stage == "agentic-ppo" and not resume:
            return 1  # killed: `train all` again must resume it
        role = {"rft": "", "critic-warmup": "critic"}.get(stage, "actor")
        hf = Path(cfg.trainer.default_local_dir) / "global_step_2" / role / "huggingface"
        shutil.copytree(self.model_dir, hf)
        (hf / "model.safetensors").write_bytes(b"weights of " + stage.encode())
        (Path(cfg.trainer.default_local_dir) / "latest_checkpointed_iteration.txt").write_text("2")
        return 0

    @staticmethod
    def _episodes(work_dir: Path) -> None:
        from cuda_agent.agent import TrajectoryWriter
        from cuda_agent.rl.rft import TokenRecord
        from cuda_agent.types import Turn

        for name, reward in (("good", 2.0), ("bad", -1.0)):
            folder = work_dir / name / "run"
            prompt = [{"role": "system", "content": "skill"}, {"role": "user", "content": "task"}]
            with TrajectoryWriter(folder / "trajectory.jsonl", "examples/scale_add", "m", prompt) as writer:
                writer.append(Turn(index=0, content="Done."))
                writer.finish(reward=reward, exit_status="finished", terminated=True)
            TokenRecord(prompt_ids=[1, 2], response_ids=[3, 4], response_mask=[1, 1], reward=reward).write(folder)


def cpu_recipe(stage: str, root: Path) -> Path:
    recipe = yaml.safe_load(bundled_recipe(stage).read_text())
    for field in ("agent_loop", "reward_function"):
        if recipe.get(field):
            recipe[field]["device"] = "cpu"
    path = root / f"{stage}.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def cpu_pipeline(tmp_path: Path, tiny_model_dir: Path) -> Path:
    """A pipeline file of every stage on the CPU with a tiny model (what the launcher double can stand in for)."""
    data = write_curriculum(tmp_path / "curriculum", "cpu", copies=1)["rl"]
    model = [f"actor_rollout_ref.model.path={tiny_model_dir}", f"critic.model.path={tiny_model_dir}"]
    files = [f"data.train_files={data}", f"data.val_files={data}"]
    stages = {
        "single-turn": {"set": [*CPU, *SMALL, *model, *files]},
        "collect": {"set": [*CPU, *files]},
        "rft-data": {},
        "rft": {"set": ["trainer.n_gpus_per_node=0", "trainer.device=cpu"]},
        "critic-warmup": {"set": [*CPU, *SMALL, f"critic.model.path={tiny_model_dir}"]},  # the file's value wins
        "agentic-ppo": {"set": [*CPU, *SMALL, *files]},
    }
    for stage, spec in stages.items():
        if stage != "rft-data":
            spec["recipe"] = str(cpu_recipe(stage, tmp_path))
    config_file = tmp_path / "pipeline.yaml"
    config_file.write_text(yaml.safe_dump({"run_dir": str(tmp_path / "run"), "stages": stages}))
    return config_file


def test_train_all_hands_each_artifact_on_and_resumes(tmp_path: Path, tiny_model_dir: Path) -> None:
    config = load_pipeline(cpu_pipeline(tmp_path, tiny_model_dir))
    leftovers, lines = VerlLeftovers(tiny_model_dir), []

    with pytest.raises(ConfigError, match="agentic-ppo exited 1"):
        Pipeline(config, leftovers, echo=lines.append).run_all()
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())["stages"]
    assert [s for s in ORDER if manifest[s]["status"] == "done"] == list(ORDER[:-1])
    assert manifest["agentic-ppo"] == {"status": "started", "attempts": 1, "artifact": None}

    run = tmp_path / "run"
    launched = {stage: overrides for stage, _, overrides in leftovers.calls}
    single_hf = str(run / "single_turn" / "hf")
    assert f"actor_rollout_ref.model.path={single_hf}" in launched["collect"]  # the warmed-up actor is collected
    assert (
        f"model.path={single_hf}" in launched["rft"]
        and f"data.train_files={run / 'rft_data' / 'rft.parquet'}" in launched["rft"]
    )
    assert f"critic.model.path={run / 'rft' / 'hf'}" in launched["critic-warmup"]  # the chain's, then the file's
    assert launched["critic-warmup"][-1] == f"critic.model.path={tiny_model_dir}"
    single_ckpt = run / "single_turn" / "checkpoints"  # the log says what each stage took from the ones before
    assert f"   single-turn: verl.trainer.main_ppo takes trainer.default_local_dir={single_ckpt}" in lines
    assert f"   collect: verl.trainer.main_ppo takes actor_rollout_ref.model.path={single_hf}" in lines
    warmup = next(line for line in lines if line.startswith("   critic-warmup:"))
    assert f"critic.model.path={run / 'rft' / 'hf'}" not in warmup and f"model.path={run / 'rft' / 'hf'}" in warmup
    assert any(line.startswith("== rft: done in ") and line.endswith(f" s, {run / 'rft' / 'hf'}") for line in lines)
    assert f"data.train_files={run / 'critic_data' / 'replay.parquet'}" in launched["critic-warmup"]
    assert f"critic.model.path={run / 'critic_warmup' / 'hf'}" in launched["agentic-ppo"]
    assert (run / "critic_warmup" / "hf" / "model.safetensors").read_bytes() == b"weights of critic-warmup"
    assert (run / "single_turn" / "steps.jsonl").exists() and (run / "single_turn" / "report.html").exists()
    import pyarrow.parquet as pq

    assert [r["input_ids"] for r in pq.read_table(run / "rft_data" / "rft.parquet").to_pylist()] == [[1, 2, 3, 4]]

    lines.clear()
    Pipeline(config, leftovers, echo=lines.append).run_all()  # again: only the half-done stage runs, resumed
    assert lines[0] == f"== single-turn: already done, {single_hf}"
    assert [(stage, resume) for stage, resume, _ in leftovers.calls[-1:]] == [("agentic-ppo", True)]
    assert len(leftovers.calls) == 6  # five trained stages, then the resumed one; nothing else again
    manifest = json.loads((run / "manifest.json").read_text())["stages"]
    assert manifest["agentic-ppo"] == {"status": "done", "attempts": 2, "artifact": str(run / "agentic_ppo" / "hf")}
    assert sorted(p.name for p in (run / "agentic_ppo").glob("metrics.*.jsonl")) == [
        "metrics.0.jsonl",
        "metrics.1.jsonl",
    ]


def test_skipped_stages_hand_on_their_given_artifacts(tmp_path: Path, tiny_model_dir: Path) -> None:
    """skip: single-turn with a model and collect with its episodes; rft-data onwards run on what was given."""
    episodes = tmp_path / "episodes"
    VerlLeftovers._episodes(episodes)
    data = write_curriculum(tmp_path / "curriculum", "cpu", copies=1)["rl"]
    stages = {
        "rft": {"set": ["trainer.n_gpus_per_node=0", "trainer.device=cpu"]},
        "critic-warmup": {"set": [*CPU, *SMALL]},
        "agentic-ppo": {"set": [*CPU, *SMALL, f"data.train_files={data}", f"data.val_files={data}"]},
    }
    for stage, spec in stages.items():
        spec["recipe"] = str(cpu_recipe(stage, tmp_path))
    skip = {"single-turn": str(tiny_model_dir), "collect": str(episodes)}
    config_file = tmp_path / "pipeline.yaml"
    config_file.write_text(yaml.safe_dump({"run_dir": str(tmp_path / "run"), "stages": stages, "skip": skip}))
    leftovers, lines = VerlLeftovers(tiny_model_dir), []

    with pytest.raises(ConfigError, match="agentic-ppo exited 1"):
        Pipeline(load_pipeline(config_file), leftovers, echo=lines.append).run_all()
    assert [stage for stage, _, _ in leftovers.calls] == ["rft", "critic-warmup", "agentic-ppo"]
    assert f"model.path={tiny_model_dir}" in leftovers.calls[0][2]  # rft starts from the given model
    run = tmp_path / "run"
    import pyarrow.parquet as pq

    assert [r["input_ids"] for r in pq.read_table(run / "rft_data" / "rft.parquet").to_pylist()] == [[1, 2, 3, 4]]
    manifest = json.loads((run / "manifest.json").read_text())["stages"]
    assert manifest["collect"] == {"status": "done", "attempts": 0, "artifact": str(episodes)}
    assert f"== single-turn: skipped, given {tiny_model_dir}" in lines

    Pipeline(load_pipeline(config_file), leftovers, echo=lines.append).run_all()  # again: only the resume
    assert [(stage, resume) for stage, resume, _ in leftovers.calls[3:]] == [("agentic-ppo", True)]


def test_a_skipped_data_stage_needs_its_artifact_and_relative_ones_become_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({"skip": {"collect": "runs/missing"}}))
    with pytest.raises(ConfigError, match="collect's artifact runs/missing does not exist"):
        load_pipeline(path)
    (tmp_path / "runs" / "episodes").mkdir(parents=True)
    path.write_text(yaml.safe_dump({"skip": {"collect": "runs/episodes", "single-turn": "Qwen/Qwen3-8B"}}))
    assert load_pipeline(path).skip == {"collect": str(tmp_path / "runs" / "episodes"), "single-turn": "Qwen/Qwen3-8B"}


def test_hf_folder_takes_the_latest_complete_checkpoint_not_a_half_saved_one(tmp_path: Path) -> None:
    """verl writes latest_checkpointed_iteration.txt once a checkpoint is complete; a kill mid-save leaves a newer
    global_step_N without it, which must not be handed to the next stage."""
    ckpt = tmp_path / "checkpoints"
    for step, weights in ((2, b"complete"), (3, b"half")):
        (ckpt / f"global_step_{step}" / "actor" / "huggingface").mkdir(parents=True)
        (ckpt / f"global_step_{step}" / "actor" / "huggingface" / "model.safetensors").write_bytes(weights)
    with pytest.raises(ConfigError, match="no complete checkpoint"):
        hf_folder(ckpt, "actor", tmp_path / "hf")
    (ckpt / "latest_checkpointed_iteration.txt").write_text("2")
    assert (hf_folder(ckpt, "actor", tmp_path / "hf") / "model.safetensors").read_bytes() == b"complete"


def test_unknown_stage_in_a_pipeline_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({"stages": {"warmup": {}}}))
    with pytest.raises(ConfigError, match="unknown stage"):
        load_pipeline(path)


def test_bundled_pipeline_file_reads() -> None:
    config = load_pipeline(Path(__file__).resolve().parents[2] / "recipes" / "pipeline.yaml")
    assert set(config.stages) <= set(ORDER)


def test_a_launch_its_checks_stop_is_not_started_nor_an_attempt(tmp_path: Path) -> None:
    """Issue 41: the manifest said "started" after a launch its pre-launch checks stopped, and the next run said
    "resuming (attempt 2)"."""
    config_file = tmp_path / "pipeline.yaml"
    single = ["actor_rollout_ref.model.path=" + str(tmp_path / "no-model"), *CPU]
    config_file.write_text(
        yaml.safe_dump({"run_dir": str(tmp_path / "run"), "stages": {"single-turn": {"set": single}}})
    )
    lines: list[str] = []

    def launcher(plan: Any, resume: bool) -> int:
        raise AssertionError("its checks should have stopped it")

    for _ in range(2):
        with pytest.raises(ConfigError, match="stage single-turn cannot launch: .*no-model does not exist"):
            Pipeline(load_pipeline(config_file), launcher, echo=lines.append).run_all()
    assert not (tmp_path / "run" / "manifest.json").exists() or "single-turn" not in json.loads(
        (tmp_path / "run" / "manifest.json").read_text()
    ).get("stages", {})
    assert not any("attempt" in line for line in lines)


def test_train_all_dry_run_checks_every_stage_and_launches_nothing(
    tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 41: `train all` had no --dry-run. Each stage is composed with what the earlier ones would hand on
    (their artifacts do not exist yet, which is no problem); nothing is launched and no manifest is written."""
    from cuda_agent.cli import main

    config_file = cpu_pipeline(tmp_path, tiny_model_dir)
    assert main(["train", "all", "--config", str(config_file), "--dry-run"]) == 0
    out = capsys.readouterr().out
    run = tmp_path / "run"
    assert f"== rft: would make {run / 'rft' / 'hf'}" in out
    assert "   rft: verl.trainer.sft_trainer takes" in out and f"model.path={run / 'single_turn' / 'hf'}" in out
    assert "dry run: every stage still to run composes against verl; 0 problem(s) to fix first" in out
    assert not (run / "manifest.json").exists()
    # a problem of its own is named with its stage, and the exit code says there is one
    broken = yaml.safe_load(config_file.read_text())
    broken["stages"]["rft-data"] = {"extra_sft": [str(tmp_path / "missing.parquet")]}
    config_file.write_text(yaml.safe_dump(broken))
    assert main(["train", "all", "--config", str(config_file), "--dry-run"]) == 2
    assert f"error: rft-data: {tmp_path / 'missing.parquet'} does not exist" in capsys.readouterr().err
