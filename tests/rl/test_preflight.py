"""The dry run's checks of what fails at scale, on the shipped single-node Qwen3-8B recipe and its real config.json."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cuda_agent.cli import main
from cuda_agent.rl import preflight
from cuda_agent.rl.config import ClusterSettings
from cuda_agent.rl.recipes import RECIPES_DIR, check_plan, load_recipe, plan_training

pytest.importorskip("verl", reason="verl is not installed (pip install -e '.[rl]')")

NODE = RECIPES_DIR / "qwen3_8b"


@pytest.fixture(scope="module")
def qwen3_dir(tiny_tokenizer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model folder with Qwen3-8B's shipped config.json (no weights) and the tiny tokenizer."""
    root = tmp_path_factory.mktemp("qwen3-8b")
    tiny_tokenizer.save_pretrained(root)
    shutil.copy(NODE / "config.json", root / "config.json")
    return root


def plan(tmp_path: Path, model: Path, *overrides: str, recipe: str = "agentic_ppo.yaml"):
    models = [f"actor_rollout_ref.model.path={model}", f"critic.model.path={model}"]
    return plan_training(load_recipe(NODE / recipe), tmp_path, [*models, *overrides])


def test_single_node_recipe_passes_verl_and_the_scale_checks_with_the_real_config(
    qwen3_dir: Path, tmp_path: Path
) -> None:
    from verl.trainer.main_ppo import need_critic, need_reference_policy, validate_config

    composed = plan(tmp_path, qwen3_dir)
    config = composed.config
    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    here = ("does not exist", "no sandbox_url", "this node has 0 GPU(s)")  # data, the judge, GPUs: not on CI
    problems = check_plan(composed, launching=False)
    assert all(any(h in p for h in here) for p in problems), problems
    rollout = config.actor_rollout_ref.rollout
    assert config.data.max_prompt_length + config.data.max_response_length == rollout.max_model_len == 40960
    assert rollout.name == "vllm" and rollout.calculate_log_probs  # the mismatch metric's input
    assert config.trainer.max_actor_ckpt_to_keep and config.trainer.max_critic_ckpt_to_keep
    assert config.trainer.n_gpus_per_node + composed.recipe.cluster.judge_gpus == composed.recipe.cluster.gpus_per_node
    collect = plan(tmp_path / "collect", qwen3_dir, recipe="collect.yaml")
    assert all(any(h in p for h in here) for p in check_plan(collect, launching=False))
    assert 0 < collect.config.data.val_max_samples < 6000


@pytest.mark.parametrize("rollout", ["vllm", "sglang", "hf"])
def test_dry_run_refuses_a_context_over_the_models_for_every_rollout(
    rollout: str, qwen3_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sets = [
        f"actor_rollout_ref.model.path={qwen3_dir}",
        f"critic.model.path={qwen3_dir}",
        "data.max_response_length=122880",  # the paper's 131,072 on a model of 40,960 positions
        "actor_rollout_ref.rollout.max_model_len=null",
        f"actor_rollout_ref.rollout.name={rollout}",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
    ]
    argv = ["train", "agentic-ppo", "--config", str(NODE / "agentic_ppo.yaml"), "--dry-run", "--out", str(tmp_path)]
    assert main([*argv, *(x for s in sets for x in ("--set", s))]) == 2
    err = capsys.readouterr().err
    expected = f"131072 tokens is over the {rollout} rollout's context of 40960 tokens"
    assert sum(expected in line for line in err.splitlines()) == 1, err


def test_a_max_model_len_over_the_positions_and_positions_without_scaling_are_refused(
    qwen3_dir: Path, tmp_path: Path
) -> None:
    over = plan(tmp_path, qwen3_dir, "actor_rollout_ref.rollout.max_model_len=65536")
    assert any(
        "max_model_len=65536 is over the model's max_position_embeddings=40960" in p
        for p in check_plan(over, launching=False)
    )
    stretched = plan(tmp_path, qwen3_dir, "+actor_rollout_ref.model.override_config.max_position_embeddings=131072")
    assert any("without rope_scaling" in p for p in check_plan(stretched, launching=False))


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["trainer.n_gpus_per_node=7"], "trainer.n_gpus_per_node=7 + cluster.judge_gpus=2 is over the node's 8"),
        (["actor_rollout_ref.actor.ulysses_sequence_parallel_size=3"], "does not divide the model's 32 attention"),
        (["actor_rollout_ref.rollout.tensor_model_parallel_size=4"], "do not divide the 6 training GPUs"),
        (["actor_rollout_ref.actor.ppo_mini_batch_size=64"], "do not split over the 3 data-parallel ranks"),
        (["trainer.max_actor_ckpt_to_keep=null"], "every save is kept"),
        (["actor_rollout_ref.rollout.calculate_log_probs=false"], "log-prob mismatch"),
    ],
)
def test_gpu_split_and_long_run_problems_are_named(
    overrides: list[str], expected: str, qwen3_dir: Path, tmp_path: Path
) -> None:
    assert any(expected in p for p in check_plan(plan(tmp_path, qwen3_dir, *overrides), launching=False))


def test_collect_without_a_cap_is_refused(qwen3_dir: Path, tmp_path: Path) -> None:
    uncapped = plan(tmp_path, qwen3_dir, "data.val_max_samples=-1", recipe="collect.yaml")
    assert any("data.val_max_samples is unset" in p for p in check_plan(uncapped, launching=False))


def test_launch_writes_the_context_the_episodes_stop_at(qwen3_dir: Path, tmp_path: Path) -> None:
    unset = plan(tmp_path, qwen3_dir, "actor_rollout_ref.rollout.max_model_len=null", "data.max_response_length=8192")
    assert preflight.resolved_max_model_len(unset.config) == 8192 + 8192  # under the model's 40,960 positions
    longer = plan(tmp_path, qwen3_dir, "actor_rollout_ref.rollout.max_model_len=null")
    assert preflight.resolved_max_model_len(longer.config) == 40960


def test_judge_far_below_the_rollout_rate_is_refused_and_the_plan_says_how_many_gpus(
    qwen3_dir: Path, tmp_path: Path
) -> None:
    cfg = plan(tmp_path, qwen3_dir).config  # 192 episodes x 8 checks within 3,600 s: 1,536 judgements an hour
    cluster = ClusterSettings(judge_gpus=2, checks_per_episode=8, judging_s_per_step=3600)
    slow = {"judgements_per_hour": 600.0, "judgements_per_hour_per_gpu": 300.0}
    (problem,) = preflight.capacity_problems(cfg, cluster, slow, "http://judge:8000")
    assert "far below the 1536" in problem and "give it 6 GPUs" in problem
    fast = {"judgements_per_hour": 1200.0, "judgements_per_hour_per_gpu": 600.0}  # 78 %: slow, not far below
    assert preflight.capacity_problems(cfg, cluster, fast, "http://judge:8000") == []
    assert preflight.capacity_problems(cfg, cluster, {"judgements_per_hour": None}, "http://judge:8000") == []
    assert preflight.judge_gpus_needed(1024, 8, 3600, 600.0) == 14


@pytest.mark.slow  # composes all five stages (~10 s on 2 cores)
def test_the_node_pipeline_only_lacks_what_a_ci_machine_has_not(tmp_path: Path) -> None:
    import yaml

    from cuda_agent.rl.pipeline import Pipeline, load_pipeline

    pipeline = yaml.safe_load((NODE / "pipeline.yaml").read_text())
    pipeline["run_dir"] = str(tmp_path / "run")
    for spec in pipeline["stages"].values():  # the file names its recipes from the checkout, as README runs it
        if "recipe" in spec:
            spec["recipe"] = str(RECIPES_DIR.parent / spec["recipe"])
    (tmp_path / "pipeline.yaml").write_text(yaml.safe_dump(pipeline))
    problems = Pipeline(load_pipeline(tmp_path / "pipeline.yaml"), echo=lambda line: None).dry_run()
    here = ("does not exist", "Hugging Face cache", "no sandbox_url", "this node has 0 GPU(s)")
    assert problems and all(any(h in p for h in here) for p in problems), problems
