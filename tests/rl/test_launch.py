"""`cuda-agent train agentic-ppo` on the CPU, end to end: verl's own trainer (RayPPOTrainer.fit) on a local Ray,
our agent loop with the `hf` rollout on a tiny random model, rewards from the real sandbox (CPU judge), a
checkpoint, then `--resume` continues at the next step with the next batch.

One module-scoped pair of runs feeds the tests (each launch starts Ray and verl's workers: minutes on two cores).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("verl", reason="verl is not installed (pip install -e '.[rl]')")
pytest.importorskip("ray")
pytest.importorskip("tokenizers")

from omegaconf import OmegaConf  # noqa: E402

from cuda_agent.errors import ConfigError  # noqa: E402
from cuda_agent.rl.launch import prepare_config  # noqa: E402
from cuda_agent.rl.recipes import bundled_recipe  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TASKS = ["examples/relu", "examples/softmax"]  # step 1 takes the first row, step 2 the second (no shuffle)


def _tiny_models(out: Path) -> tuple[Path, Path]:
    spec = importlib.util.spec_from_file_location("tiny_model", ROOT / "bench" / "tiny_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build(out, vocab_size=4096, hidden=32, layers=1, seed=0)


def _train(run: Path, steps: int, *extra: str) -> subprocess.CompletedProcess:
    actor, critic = run.parent / "tiny" / "actor", run.parent / "tiny" / "critic"
    data = run.parent / "data.parquet"
    overrides = {
        "actor_rollout_ref.model.path": actor,
        "critic.model.path": critic,
        "critic.model.trust_remote_code": "true",
        "data.train_files": data,
        "data.val_files": data,
        "data.shuffle": "false",
        "data.train_batch_size": 1,
        "data.val_batch_size": 1,
        "data.max_prompt_length": 4096,
        "data.max_response_length": 64,
        "actor_rollout_ref.actor.ppo_mini_batch_size": 1,
        "actor_rollout_ref.actor.ulysses_sequence_parallel_size": 1,
        "critic.ulysses_sequence_parallel_size": 1,
        "actor_rollout_ref.actor.strategy": "fsdp2",
        "critic.strategy": "fsdp2",
        "+actor_rollout_ref.model.override_config.attn_implementation": "sdpa",
        # fp32 actor (no bf16 autocast), so its recomputed log-probs can be held to the rollout's at 1e-3
        "+actor_rollout_ref.actor.fsdp_config.mixed_precision": "{param_dtype:fp32,reduce_dtype:fp32,buffer_dtype:fp32}",
        "actor_rollout_ref.rollout.name": "hf",
        "actor_rollout_ref.rollout.tensor_model_parallel_size": 1,
        "actor_rollout_ref.rollout.dtype": "float32",
        "actor_rollout_ref.rollout.calculate_log_probs": "true",
        "actor_rollout_ref.rollout.multi_turn.max_assistant_turns": 1,
        "actor_rollout_ref.rollout.agent.num_workers": 1,
        # token-level importance weights exp(actor - rollout log-prob): verl logs their max and min per step
        "algorithm.rollout_correction.rollout_is": "token",
        "trainer.device": "cpu",
        "trainer.n_gpus_per_node": 1,
        "trainer.total_training_steps": steps,
        "trainer.save_freq": 1,
        "trainer.test_freq": -1,
        "trainer.val_before_train": "false",
        "trainer.logger": "[console,file]",
        "trainer.default_local_dir": run.parent / "checkpoints",
    }
    sets = [arg for key, value in overrides.items() for arg in ("--set", f"{key}={value}")]
    command = [sys.executable, "-m", "cuda_agent", "train", "agentic-ppo", "--config", str(run.parent / "recipe.yaml")]
    env = {**os.environ, "RAY_DEDUP_LOGS": "0"}
    run.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [*command, "--out", str(run), *sets, *extra], cwd=run, env=env, capture_output=True, text=True, timeout=1500
    )


def _metrics(run: Path) -> list[dict]:
    path = run / "metrics.0.jsonl"  # verl's file logger, pointed by the launch at a file under --out
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _episode_tasks(root: Path) -> set[str]:
    return {folder.name.rsplit("-", 1)[0] for folder in (root / "rollouts").iterdir() if folder.is_dir()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from cuda_agent.rl.data import rl_rows, write_rl_parquet
    from cuda_agent.tasks import Catalog

    root = tmp_path_factory.mktemp("train")
    _tiny_models(root / "tiny")
    write_rl_parquet(
        rl_rows([Catalog().resolve(ref) for ref in TASKS], single_turn=False, device="cpu"), root / "data.parquet"
    )
    recipe = yaml.safe_load(bundled_recipe("agentic-ppo").read_text())
    recipe["agent_loop"].update(device="cpu", work_dir=str(root / "rollouts"))
    (root / "recipe.yaml").write_text(yaml.safe_dump(recipe))

    first = _train(root / "first", steps=1)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-6000:]
    first_tasks = _episode_tasks(root)
    again = _train(root / "again", steps=2)  # no --resume: refused before anything starts
    resumed = _train(root / "resumed", 2, "--resume")
    assert resumed.returncode == 0, resumed.stdout[-4000:] + resumed.stderr[-6000:]
    return {"root": root, "first_tasks": first_tasks, "all_tasks": _episode_tasks(root), "again": again}


@pytest.mark.slow
@pytest.mark.integration
def test_one_step_of_verls_trainer_with_sandbox_rewards(runs: dict) -> None:
    [step] = _metrics(runs["root"] / "first")
    data = step["data"]
    assert step["step"] == 1 and data["training/global_step"] == 1
    # The real judge scored the episode; a random model's untouched workspace is never a pass.
    assert data["critic/score/mean"] == -1.0 and data["timing_s/cuda_agent/judge_s/mean"] > 0
    for key in ("actor/grad_norm", "critic/grad_norm", "critic/vf_loss", "actor/pg_loss"):
        assert math.isfinite(data[key]), key
    assert data["actor/grad_norm"] > 0 and data["critic/grad_norm"] > 0
    # The rollout's log-probs are what verl's fp32 actor recomputes for the same tokens, to 1e-3. The rollout
    # server starts from random weights (verl's load_format: dummy), so this also shows the actor's weights synced.
    assert abs(math.log(data["rollout_corr/rollout_is_max"])) < 1e-3
    assert abs(math.log(data["rollout_corr/rollout_is_min"])) < 1e-3
    assert runs["first_tasks"] == {"examples_relu"}
    checkpoint = runs["root"] / "checkpoints" / "global_step_1"
    assert (checkpoint / "data.pt").is_file() and (checkpoint / "actor").is_dir() and (checkpoint / "critic").is_dir()


@pytest.mark.slow
@pytest.mark.integration
def test_resume_continues_with_the_next_step_and_batch(runs: dict) -> None:
    assert runs["again"].returncode != 0 and "pass --resume" in runs["again"].stderr
    steps = _metrics(runs["root"] / "resumed")
    assert [s["step"] for s in steps] == [2]  # step 1 is not repeated
    # The data cursor came back with the checkpoint: step 2 rolled out the second row, not the first again.
    assert runs["all_tasks"] - runs["first_tasks"] == {"examples_softmax"}
    rollouts = runs["root"] / "rollouts"
    assert len([f for f in rollouts.iterdir() if f.name.startswith("examples_relu")]) == 1
    assert math.isfinite(steps[0]["data"]["actor/grad_norm"])


def test_a_fresh_run_refuses_a_folder_with_checkpoints_and_resume_selects_auto(tmp_path: Path) -> None:
    config = OmegaConf.create(
        {
            "trainer": {"use_v1": False, "device": "cuda", "resume_mode": "auto", "default_local_dir": str(tmp_path)},
            "data": {"train_files": "x.parquet", "val_files": None},
            "actor_rollout_ref": {"rollout": {"name": "vllm", "tensor_model_parallel_size": 2}, "model": {}},
            "ray_kwargs": {"ray_init": {"num_cpus": None}},
        }
    )
    prepare_config(config)
    assert config.trainer.resume_mode == "disable"  # nothing to resume: start fresh
    (tmp_path / "global_step_3").mkdir()
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("3")
    with pytest.raises(ConfigError, match="up to global_step_3: pass --resume"):
        prepare_config(config)
    prepare_config(config, resume=True)
    assert config.trainer.resume_mode == "auto"


def test_hf_rollout_is_loaded_through_verls_external_lib_hook() -> None:
    config = OmegaConf.create(
        {
            "trainer": {
                "use_v1": False,
                "device": "cpu",
                "resume_mode": "disable",
                "default_local_dir": "/nonexistent",
            },
            "trainer_extra": {},
            "data": {},
            "actor_rollout_ref": {"rollout": {"name": "hf", "tensor_model_parallel_size": 1}, "model": {}},
            "ray_kwargs": {"ray_init": {"num_cpus": None}},
        }
    )
    config.trainer.n_gpus_per_node, config.trainer.nnodes = 2, 1
    env = prepare_config(config)
    assert list(config.actor_rollout_ref.model.external_lib) == [
        "cuda_agent.rl.verl_logprobs",
        "cuda_agent.rl.hf_rollout",
    ]
    assert env["VERL_PLATFORM"] == "cpu" and config.ray_kwargs.ray_init.num_gpus == 2
    assert config.ray_kwargs.ray_init.runtime_env.env_vars["VERL_PLATFORM"] == "cpu"
    config.actor_rollout_ref.rollout.tensor_model_parallel_size = 2
    with pytest.raises(ConfigError, match="tensor_model_parallel_size=1"):
        prepare_config(config)


def test_ray_workers_get_the_python_path_and_the_metrics_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a joined cluster (RAY_ADDRESS) verl's workers start with the cluster's environment, not ours."""
    monkeypatch.setenv("PYTHONPATH", "/checkout")
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", "/runs/stage/metrics.0.jsonl")
    config = OmegaConf.create(
        {
            "trainer": {"use_v1": False, "device": "cuda", "resume_mode": "disable", "default_local_dir": "/none"},
            "data": {},
            "actor_rollout_ref": {"rollout": {"name": "vllm", "tensor_model_parallel_size": 1}, "model": {}},
            "ray_kwargs": {"ray_init": {"num_cpus": None}},
        }
    )
    prepare_config(config)
    env_vars = config.ray_kwargs.ray_init.runtime_env.env_vars
    assert (env_vars.PYTHONPATH, env_vars.VERL_FILE_LOGGER_PATH) == ("/checkout", "/runs/stage/metrics.0.jsonl")
