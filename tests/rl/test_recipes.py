"""Every bundled recipe composes against the installed verl's config, with the paper's values; the checks and the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cuda_agent.cli import main
from cuda_agent.errors import ConfigError
from cuda_agent.rl.recipes import STAGES, bundled_recipe, check_plan, hydra_value, load_recipe, plan_training

pytest.importorskip("verl", reason="verl is not installed (pip install -e '.[rl]')")


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("plans")
    return {stage: plan_training(load_recipe(bundled_recipe(stage)), out / stage) for stage in STAGES}


@pytest.mark.parametrize("stage", STAGES)
def test_bundled_recipe_composes_and_only_lacks_its_inputs(plans: dict, stage: str) -> None:
    problems = check_plan(plans[stage], launching=False)
    assert all("does not exist" in p for p in problems), problems  # checkpoints and data of earlier stages


def test_agentic_ppo_has_the_papers_hyperparameters(plans: dict) -> None:
    cfg = plans["agentic-ppo"].config
    actor, rollout = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout
    assert (cfg.algorithm.adv_estimator, cfg.algorithm.gamma, cfg.algorithm.lam) == ("gae", 1.0, 0.95)
    assert (actor.clip_ratio_low, actor.clip_ratio_high) == (0.2, 0.28)
    assert cfg.data.train_batch_size == actor.ppo_mini_batch_size == 1024
    assert (actor.optim.lr, cfg.critic.optim.lr, cfg.trainer.total_training_steps) == (3e-6, 6e-6, 150)
    assert rollout.prompt_length + rollout.response_length == 131_072
    assert rollout.multi_turn.max_assistant_turns == 150 and rollout.agent.default_agent_loop == "cuda_agent"
    loop_yaml = yaml.safe_load(Path(rollout.agent.agent_loop_config_path).read_text())
    assert loop_yaml[0]["_target_"] == "cuda_agent.rl.agent_loop.CudaAgentLoop" and loop_yaml[0]["max_turns"] == 150
    single = plans["single-turn"].config.actor_rollout_ref.rollout
    assert single.prompt_length + single.response_length == 32_768
    assert plans["critic-warmup"].config.trainer.critic_warmup > 0
    assert plans["rft"].config.data.custom_cls.name == "RFTDataset"


def test_unknown_verl_key_is_a_config_error(tmp_path: Path) -> None:
    recipe = load_recipe(bundled_recipe("rft"))
    with pytest.raises(ConfigError, match="rejects the config"):
        plan_training(recipe, tmp_path, ["trainer.no_such_key=1"])


def test_checks_report_an_unreachable_sandbox_and_missing_gpus(tmp_path: Path) -> None:
    recipe = load_recipe(bundled_recipe("agentic-ppo"))
    recipe = recipe.model_copy(
        update={"agent_loop": recipe.agent_loop.model_copy(update={"sandbox_url": "http://127.0.0.1:9"})}
    )
    problems = check_plan(plan_training(recipe, tmp_path), launching=True)
    assert any("does not answer /health" in p for p in problems)
    assert any("n_gpus_per_node=8" in p for p in problems)


def test_hydra_values_are_quoted_where_needed() -> None:
    assert [hydra_value(v) for v in (None, True, 3e-6, "vllm", "a b", [1, "x"])] == [
        "null",
        "true",
        "3e-06",
        "vllm",
        "'a b'",
        "[1,x]",
    ]


def test_train_dry_run_prints_and_stops(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["train", "rft", "--dry-run", "--out", str(tmp_path), "--set", "trainer.n_gpus_per_node=2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "torchrun --standalone --nproc_per_node=2 -m verl.trainer.sft_trainer" in out
    assert "dry run: the config composes against verl" in out


@pytest.mark.parametrize("stage", [s for s in STAGES if s != "rft"])
def test_ppo_recipes_pass_verls_own_config_validation(tmp_path: Path, tiny_model_dir: Path, stage: str) -> None:
    from verl.trainer.main_ppo import need_critic, need_reference_policy, validate_config

    models = [f"actor_rollout_ref.model.path={tiny_model_dir}", f"critic.model.path={tiny_model_dir}"]
    config = plan_training(load_recipe(bundled_recipe(stage)), tmp_path, models).config
    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    assert config.trainer.use_v1 is False  # the legacy trainer: it needs no TransferQueue and logs our metrics


def test_single_turn_recipe_judges_with_our_reward_function(plans: dict) -> None:
    cfg = plans["single-turn"].config
    reward = cfg.reward.custom_reward_function
    assert (reward.path, reward.name) == ("pkg://cuda_agent.rl.single_turn", "compute_score")
    assert Path(reward.reward_kwargs.work_dir).is_absolute() and reward.reward_kwargs.device == "cuda"
    agent = cfg.actor_rollout_ref.rollout.agent
    assert agent.default_agent_loop == "single_turn_agent"
    assert agent.agent_loop_manager_class == "cuda_agent.rl.agent_loop.CudaAgentLoopManager"
