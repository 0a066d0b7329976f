"""The single-node recipe's shape run small on one GPU: recipes/qwen3_8b/agentic_ppo.yaml with the tiny model, one
training GPU and the judge on the same card (`share_training_gpus`), three steps. Only the sizes shrink (model,
GPUs, batch, context); everything else is the recipe's own: GAE, the clip range, checkpoint retention, the
rollout's log-probs and the metrics they give (entropy, clipped ratio, rollout-vs-actor mismatch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("verl", reason="verl is not installed (pip install -e '.[rl]')")

from cuda_agent.rl.recipes import RECIPES_DIR  # noqa: E402
from tests.rl.test_launch import _tiny_models  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.slow, pytest.mark.integration]

SMALL = {
    "trainer.n_gpus_per_node": 1,
    "actor_rollout_ref.actor.ulysses_sequence_parallel_size": 1,
    "critic.ulysses_sequence_parallel_size": 1,
    "actor_rollout_ref.rollout.tensor_model_parallel_size": 1,
    "actor_rollout_ref.rollout.name": "hf",  # no vLLM on our GPU image; the recipe's is vllm
    "actor_rollout_ref.rollout.gpu_memory_utilization": 0.3,
    "data.train_batch_size": 2,
    "data.val_batch_size": 2,
    "actor_rollout_ref.actor.ppo_mini_batch_size": 2,
    "data.max_prompt_length": 4096,
    "data.max_response_length": 1024,
    "actor_rollout_ref.rollout.max_model_len": 5120,
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": 8192,
    "critic.ppo_max_token_len_per_gpu": 8192,
    "critic.model.trust_remote_code": "true",
    "+actor_rollout_ref.model.override_config.attn_implementation": "sdpa",
    "trainer.total_training_steps": 3,
    "trainer.save_freq": 1,
    "trainer.test_freq": -1,
    "trainer.val_before_train": "false",
}


def test_the_node_recipe_runs_small_on_one_gpu_with_its_own_settings(tmp_path: Path) -> None:
    import torch

    from cuda_agent.rl.data import rl_rows, write_rl_parquet
    from cuda_agent.tasks import Catalog

    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    actor, critic = _tiny_models(tmp_path / "tiny")
    data = tmp_path / "data.parquet"
    tasks = [Catalog().resolve(ref) for ref in ("examples/relu", "examples/softmax")] * 3
    write_rl_parquet(rl_rows(tasks, single_turn=False, device="cuda"), data)
    recipe = yaml.safe_load((RECIPES_DIR / "qwen3_8b" / "agentic_ppo.yaml").read_text())
    recipe.pop("hf_config")  # the tiny model's own config.json is read
    recipe["cluster"].update(gpus_per_node=1, judge_gpus=0)
    recipe["agent_loop"].update(work_dir=str(tmp_path / "rollouts"), share_training_gpus=True, max_turns=3)
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    ckpt = tmp_path / "checkpoints"
    paths = {"actor_rollout_ref.model.path": actor, "critic.model.path": critic, "trainer.default_local_dir": ckpt}
    paths.update({"data.train_files": data, "data.val_files": data})
    sets = [arg for key, value in {**SMALL, **paths}.items() for arg in ("--set", f"{key}={value}")]
    command = [sys.executable, "-m", "cuda_agent", "train", "agentic-ppo", "--config", str(tmp_path / "recipe.yaml")]
    run = tmp_path / "run"
    done = subprocess.run(
        [*command, "--out", str(run), *sets], cwd=tmp_path, env={**os.environ, "RAY_DEDUP_LOGS": "0"},
        capture_output=True, text=True, timeout=1500,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-6000:]
    steps = [json.loads(line) for line in (run / "metrics.0.jsonl").read_text().splitlines() if line.strip()]
    assert [step["step"] for step in steps] == [1, 2, 3]
    for step in steps:
        logged = step["data"]
        for key in (
            "actor/entropy",
            "response_length/clip_ratio",
            "timing_s/cuda_agent/clipped_ratio",
            "timing_s/cuda_agent/our_failures",
            "training/rollout_probs_diff_mean",
            "training/rollout_probs_diff_max",
        ):
            assert key in logged, key
        assert logged["timing_s/cuda_agent/our_failures"] == 0.0
    kept = [
        folder
        for folder in ckpt.glob("global_step_*")
        if (folder / "actor").is_dir() and any((folder / "actor").iterdir())
    ]
    assert len(kept) <= 2, kept  # trainer.max_actor_ckpt_to_keep: 2
