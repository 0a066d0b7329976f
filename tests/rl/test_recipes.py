"""Every bundled recipe composes against the installed verl's config, with the paper's values; the checks and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cuda_agent.cli import main
from cuda_agent.errors import ConfigError
from cuda_agent.rl.recipes import STAGES, bundled_recipe, check_plan, hydra_value, launch, load_recipe, plan_training

pytest.importorskip("verl", reason="verl is not installed (pip install -e '.[rl]')")


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("plans")
    return {stage: plan_training(load_recipe(bundled_recipe(stage)), out / stage) for stage in STAGES}


EXPECTED_HERE = ("does not exist", "Hugging Face cache", "n_gpus_per_node=8 but this node has 0", "no sandbox_url")
"""What a bundled recipe lacks on a CI machine: earlier stages' outputs, the model, GPUs, a judge service."""


@pytest.mark.parametrize("stage", STAGES)
def test_bundled_recipe_composes_and_only_lacks_its_inputs(plans: dict, stage: str) -> None:
    problems = check_plan(plans[stage], launching=False)
    assert all(any(e in p for e in EXPECTED_HERE) for p in problems), problems
    assert any("n_gpus_per_node" in p for p in problems)  # the dry run checks GPUs too
    hub = [p for p in problems if "Hugging Face cache" in p]  # the command huggingface_hub >= 1.0 has
    assert all(p.endswith(f"`hf download {p.split()[1]}`") for p in hub), problems


@pytest.mark.parametrize("stage", [s for s in STAGES if s != "collect"])
def test_training_stages_save_checkpoints_to_hand_on(plans: dict, stage: str, tmp_path: Path) -> None:
    cfg = plans[stage].config
    assert str(cfg.trainer.save_freq) == "after_each_epoch" or cfg.trainer.save_freq > 0
    assert "file" in cfg.trainer.logger  # per-step metrics as JSONL
    unsaved = plan_training(load_recipe(bundled_recipe(stage)), tmp_path, ["trainer.save_freq=-1"])
    assert any("saves nothing to hand on" in p for p in check_plan(unsaved, launching=False))


@pytest.mark.parametrize("stage", ["single-turn", "critic-warmup", "agentic-ppo"])
def test_ppo_stages_average_per_trajectory_then_over_trajectories(plans: dict, stage: str) -> None:
    cfg = plans[stage].config
    assert cfg.actor_rollout_ref.actor.loss_agg_mode == cfg.critic.loss_agg_mode == "seq-mean-token-mean"
    assert cfg.data.filter_overlong_prompts and cfg.data.val_batch_size


def test_collect_needs_no_critic_and_samples_its_validation(plans: dict, tmp_path: Path, tiny_model_dir: Path) -> None:
    from verl.trainer.ppo.utils import need_critic

    cfg = plans["collect"].config
    for stage, saves in (("collect", True), ("agentic-ppo", False)):  # tokens.json: only collect's readers need it
        loop_file = Path(plans[stage].config.actor_rollout_ref.rollout.agent.agent_loop_config_path)
        assert yaml.safe_load(loop_file.read_text())[0]["save_tokens"] is saves
    assert not need_critic(cfg)  # GAE would start a critic on verl's placeholder model path
    val = cfg.actor_rollout_ref.rollout.val_kwargs
    assert val.n == 4 and val.do_sample and val.temperature > 0  # not 4 greedy near-duplicates
    assert 0 < cfg.data.val_batch_size < 6000
    models = [f"actor_rollout_ref.model.path={tiny_model_dir}"]
    plan = plan_training(load_recipe(bundled_recipe("collect")), tmp_path, models)
    assert not any("critic" in p or "validation fails" in p for p in check_plan(plan, launching=False))
    with_critic = plan_training(load_recipe(bundled_recipe("collect")), tmp_path, [*models, "critic.enable=true"])
    assert any("verl's placeholder" in p for p in check_plan(with_critic, launching=False))


def test_judging_on_the_training_gpus_is_refused_unless_asked_for(tmp_path: Path) -> None:
    recipe = load_recipe(bundled_recipe("single-turn"))
    share = "judged on the training GPUs"
    assert any(share in p for p in check_plan(plan_training(recipe, tmp_path), launching=False))
    for update in ({"share_training_gpus": True}, {"device": "cpu"}):
        judged = recipe.model_copy(update={"reward_function": recipe.reward_function.model_copy(update=update)})
        assert not any(share in p for p in check_plan(plan_training(judged, tmp_path), launching=False))


def test_set_max_assistant_turns_reaches_the_agent_loop(tmp_path: Path) -> None:
    recipe = load_recipe(bundled_recipe("agentic-ppo"))
    turns = "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=7"
    plan = plan_training(recipe, tmp_path, [turns])
    loop_yaml = yaml.safe_load(Path(plan.config.actor_rollout_ref.rollout.agent.agent_loop_config_path).read_text())
    assert loop_yaml[0]["max_turns"] == 7
    other = tmp_path / "mine.yaml"
    other.write_text(yaml.safe_dump([{**loop_yaml[0], "max_turns": 150}]))
    mine = plan_training(
        recipe, tmp_path / "b", [turns, f"actor_rollout_ref.rollout.agent.agent_loop_config_path={other}"]
    )
    assert any("max_turns 150 would override" in p for p in check_plan(mine, launching=False))


def test_overlong_single_turn_prompts_are_dropped_not_fatal(tmp_path: Path) -> None:
    """KernelBench L3/29 and L3/30 carry 16k and 23k characters of code: over the 4,096-token prompt budget."""
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from cuda_agent.rl.data import rl_rows, write_rl_parquet
    from cuda_agent.tasks import Catalog

    tasks = [Catalog().resolve(f"kernelbench/{ref}") for ref in ("L1/19", "L3/29", "L3/30")]
    rows = rl_rows(tasks, single_turn=True, device="cuda")
    data = write_rl_parquet(rows, tmp_path / "st.parquet")
    model = bpe_model_dir(tmp_path / "model", [m["content"] for row in rows for m in row["prompt"]])
    files = [f"data.train_files={data}", f"data.val_files={data}", f"actor_rollout_ref.model.path={model}"]
    plan = plan_training(load_recipe(bundled_recipe("single-turn")), tmp_path, [*files, f"critic.model.path={model}"])
    from transformers import AutoTokenizer

    dataset = RLHFDataset([str(data)], AutoTokenizer.from_pretrained(model), plan.config.data)
    assert [row["extra_info"]["task"] for row in dataset.dataframe] == ["kernelbench/L1/19"]
    unfiltered = plan_training(plan.recipe, tmp_path, [*plan.overrides[-4:], "data.filter_overlong_prompts=false"])
    assert any("2 of 3 prompts are longer than" in p for p in check_plan(unfiltered, launching=False))


def bpe_model_dir(root: Path, texts: list[str]) -> Path:
    """A tokenizer trained on `texts` (byte-level BPE, a few characters per token, like a real one), with ChatML."""
    import tokenizers
    import transformers

    from cuda_agent.agent.models.tool_text import CHATML_TOOLS_TEMPLATE

    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    specials = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=4000, special_tokens=specials, initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(texts, trainer)
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", chat_template=CHATML_TOOLS_TEMPLATE
    )
    fast.save_pretrained(root)
    return root


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
    warmup = plans["critic-warmup"]
    assert warmup.recipe.entrypoint == "cuda_agent.rl.critic_warmup"  # the frozen-actor trainer
    assert warmup.config.actor_rollout_ref.rollout.agent.default_agent_loop == "cuda_agent_replay"
    assert plans["rft"].config.data.custom_cls.name == "RFTDataset"


def test_relative_local_model_paths_become_absolute_and_hub_ids_stay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """verl's Ray workers and a joined cluster's processes do not run in our folder: a relative model path must not
    reach them as given."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "checkpoints" / "rft" / "hf").mkdir(parents=True)
    local = str(tmp_path / "checkpoints" / "rft" / "hf")
    sets = ["actor_rollout_ref.model.path=checkpoints/rft/hf", "critic.model.path=Qwen/Qwen3-8B"]
    ppo = plan_training(load_recipe(bundled_recipe("agentic-ppo")), tmp_path / "out", sets)
    assert ppo.config.actor_rollout_ref.model.path == local
    assert ppo.config.critic.model.path == "Qwen/Qwen3-8B"  # a hub id: nothing here to resolve
    sft = plan_training(load_recipe(bundled_recipe("rft")), tmp_path / "sft", ["model.path=checkpoints/rft/hf"])
    assert sft.config.model.path == local and sft.command[-1] == f"model.path={local}"  # torchrun gets it too


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
    assert not any("no sandbox_url" in p for p in problems)  # judged by the service, on GPUs of its own
    assert any("n_gpus_per_node=8" in p for p in problems)


def test_each_of_a_list_of_validation_files_is_checked(tmp_path: Path) -> None:
    # bench/agentic_gpu.sh validates on the held-out tasks and the training tasks: two files, both checked.
    there = tmp_path / "heldout.parquet"
    there.write_bytes(b"")
    recipe = load_recipe(bundled_recipe("agentic-ppo"))
    plan = plan_training(recipe, tmp_path / "out", [f"data.val_files=[{there},{tmp_path / 'train.parquet'}]"])
    missing = [p for p in check_plan(plan, launching=False) if p.startswith("data.val_files")]
    assert missing == [f"data.val_files: {tmp_path / 'train.parquet'} does not exist"]


def test_the_sandbox_url_of_the_environment_travels_in_the_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """verl's workers on a joined Ray cluster do not see this process's environment: the plan must carry the URL."""
    url = "http://127.0.0.1:9"
    monkeypatch.setenv("CUDA_AGENT_SANDBOX_URL", url)
    single = plan_training(load_recipe(bundled_recipe("single-turn")), tmp_path / "single")
    agentic = plan_training(load_recipe(bundled_recipe("agentic-ppo")), tmp_path / "agentic")
    assert single.config.reward.custom_reward_function.reward_kwargs.sandbox_url == url
    loop_file = Path(agentic.config.actor_rollout_ref.rollout.agent.agent_loop_config_path)
    assert yaml.safe_load(loop_file.read_text())[0]["sandbox_url"] == url
    monkeypatch.delenv("CUDA_AGENT_SANDBOX_URL")
    for plan in (single, agentic):
        problems = check_plan(plan, launching=False)
        assert not any("no sandbox_url" in p for p in problems)
        assert any("does not answer /health" in p for p in problems)


def test_hydra_values_are_quoted_where_needed() -> None:
    assert [hydra_value(v) for v in (None, True, 3e-6, "vllm", "a b", [1, "x"])] == [
        "null",
        "true",
        "3e-06",
        "vllm",
        "'a b'",
        "[1,x]",
    ]


def test_train_dry_run_prints_and_exits_non_zero_on_problems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["train", "rft", "--dry-run", "--out", str(tmp_path), "--set", "trainer.n_gpus_per_node=2"]
    assert main(argv) == 2  # this machine has no GPU, and no single-turn checkpoint
    captured = capsys.readouterr()
    assert "torchrun --standalone --nproc_per_node=2 -m verl.trainer.sft_trainer" in captured.out
    assert "dry run: the config composes against verl" in captured.out
    assert "error: trainer.n_gpus_per_node=2 but this node has 0 GPU(s)" in captured.err


def test_sft_on_the_cpu_runs_verls_trainer_through_the_gloo_entry_point(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "train",
        "rft",
        "--dry-run",
        "--out",
        str(tmp_path),
        "--set",
        "trainer.device=cpu",
        "--set",
        "trainer.n_gpus_per_node=1",
    ]
    main(argv)
    assert "torchrun --standalone --nproc_per_node=1 -m cuda_agent.rl.sft_cpu" in capsys.readouterr().out


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


def test_each_launch_logs_to_a_metrics_file_of_its_own_under_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`train STAGE --out DIR` by hand, then `--resume`: verl's file logger truncates its file, so two files."""
    import sys

    from cuda_agent.rl.report import report_run

    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", "set by a test")  # launch sets it; monkeypatch restores it
    out = tmp_path / "out"
    plan = plan_training(load_recipe(bundled_recipe("rft")), out, [f"trainer.default_local_dir={tmp_path / 'ckpt'}"])
    write = "import os, sys; open(os.environ['VERL_FILE_LOGGER_PATH'], 'w').write(sys.argv[1])"
    for step in (1, 2):  # stands in for verl's SFT trainer: its file logger's one line
        line = f'{{"step": {step}, "data": {{"train/loss": {step}.0}}}}\n'
        assert launch(plan.model_copy(update={"command": [sys.executable, "-c", write, line]})) == 0
    assert sorted(p.name for p in out.glob("metrics.*.jsonl")) == ["metrics.0.jsonl", "metrics.1.jsonl"]
    steps, _, _ = report_run(out)
    assert [json.loads(line)["step"] for line in steps.read_text().splitlines()] == [1, 2]


def test_rft_refuses_a_folder_with_checkpoints_unless_resumed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """verl's SFT trainer defaults to resume_mode=auto: the launch must decide, as it does for PPO."""
    import sys

    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", "set by a test")
    ckpt, seen = tmp_path / "ckpt", tmp_path / "last_argument"
    plan = plan_training(load_recipe(bundled_recipe("rft")), tmp_path / "out", [f"trainer.default_local_dir={ckpt}"])
    record = "import sys; open(sys.argv[1], 'w').write(sys.argv[-1])"  # stands in for torchrun: its last override
    plan = plan.model_copy(update={"command": [sys.executable, "-c", record, str(seen)]})
    assert launch(plan) == 0 and seen.read_text() == "trainer.resume_mode=disable"
    (ckpt / "global_step_3").mkdir(parents=True)
    (ckpt / "latest_checkpointed_iteration.txt").write_text("3")
    with pytest.raises(ConfigError, match="up to global_step_3: pass --resume"):
        launch(plan)
    assert launch(plan, resume=True) == 0 and seen.read_text() == "trainer.resume_mode=auto"


def test_a_reward_function_without_our_agent_loop_manager_is_a_problem(plans: dict, tmp_path: Path) -> None:
    """Only CudaAgentLoopManager masks the samples our judge failed on; without it they train as reward 0."""
    manager = "cuda_agent.rl.agent_loop.CudaAgentLoopManager"
    assert not any(manager in p for p in check_plan(plans["single-turn"], launching=False))
    recipe = load_recipe(bundled_recipe("single-turn"))
    overrides = {k: v for k, v in recipe.overrides.items() if not k.endswith("agent_loop_manager_class")}
    plan = plan_training(recipe.model_copy(update={"overrides": overrides}), tmp_path)
    assert any(f"is not {manager}" in p for p in check_plan(plan, launching=False))


def test_the_curriculum_ppo_recipe_reads_the_hf_model_the_sft_recipe_saves(tmp_path: Path) -> None:
    """README's curriculum commands run in order with nothing copied by hand between the two recipes."""
    recipes = Path(__file__).resolve().parents[2] / "recipes"
    sft = plan_training(load_recipe(recipes / "curriculum_sft.yaml"), tmp_path / "sft").config
    ppo = plan_training(load_recipe(recipes / "curriculum_ppo.yaml"), tmp_path / "ppo").config
    assert "hf_model" in sft.checkpoint.save_contents
    last = f"{sft.trainer.default_local_dir}/global_step_{sft.trainer.total_training_steps}/huggingface"
    assert ppo.actor_rollout_ref.model.path == last
    assert sft.model.path == "runs/tiny/actor" and ppo.critic.model.path == "runs/tiny/critic"  # bench/tiny_model.py


def test_the_curriculum_sft_recipe_drops_what_costs_a_tiny_model_more_than_its_training(tmp_path: Path) -> None:
    """verl's defaults (8 loader processes started every epoch, torch.compile, gradient checkpointing) kept the H200's
    SFT of the tiny model from finishing 300 steps in 480 s (recipes/curriculum_sft.yaml's header)."""
    recipes = Path(__file__).resolve().parents[2] / "recipes"
    sft = plan_training(load_recipe(recipes / "curriculum_sft.yaml"), tmp_path / "sft").config
    assert sft.data.num_workers == 0 and sft.engine.use_torch_compile is False
    assert sft.model.enable_gradient_checkpointing is False


def test_the_agentic_curriculum_recipes_chain_and_pass_verls_validation(tmp_path: Path, tiny_model_dir: Path) -> None:
    """SFT on the scripted episodes hands its HF model to agentic PPO through CudaAgentLoop (compact prompt, 8k
    context), validated on the held-out tasks only."""
    from verl.trainer.main_ppo import need_critic, need_reference_policy, validate_config

    recipes = Path(__file__).resolve().parents[2] / "recipes"
    sft = plan_training(load_recipe(recipes / "agentic_curriculum_sft.yaml"), tmp_path / "sft").config
    recipe = load_recipe(recipes / "agentic_curriculum_ppo.yaml")
    ppo = plan_training(recipe, tmp_path / "ppo").config
    last = f"{sft.trainer.default_local_dir}/global_step_{sft.trainer.total_training_steps}/huggingface"
    assert ppo.actor_rollout_ref.model.path == last and "hf_model" in sft.checkpoint.save_contents
    assert sft.data.custom_cls.name == "RFTDataset" and sft.data.max_length == 8192
    assert ppo.data.max_prompt_length + ppo.data.max_response_length == 8192
    assert recipe.agent_loop.compact_prompt and ppo.actor_rollout_ref.rollout.agent.default_agent_loop == "cuda_agent"
    assert ppo.data.val_files.endswith("heldout.parquet") and ppo.data.train_files.endswith("/rl.parquet")
    loops = yaml.safe_load((tmp_path / "ppo" / "agent_loop.yaml").read_text())
    assert loops[0]["compact_prompt"] is True and loops[0]["max_turns"] == 24

    models = [f"actor_rollout_ref.model.path={tiny_model_dir}", f"critic.model.path={tiny_model_dir}"]
    config = plan_training(recipe, tmp_path / "ppo_tiny", models).config
    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))


def test_the_agentic_critic_warmup_replays_with_ppos_sizes_and_a_frozen_actor(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    """The demo's warm-up (bench/agentic_gpu.sh) trains the critic agentic PPO starts from, on the scripted episodes
    replayed: the same context, discount and critic loss as PPO, Monte-Carlo returns, the replay loop,
    the frozen-actor trainer, and a checkpoint every step (a warm-up cut by its time box still hands on its last
    step)."""
    from omegaconf import OmegaConf
    from verl.trainer.main_ppo import need_critic, need_reference_policy, validate_config

    recipes = Path(__file__).resolve().parents[2] / "recipes"
    recipe = load_recipe(recipes / "agentic_critic_warmup.yaml")
    warm = plan_training(recipe, tmp_path / "warm").config
    ppo = plan_training(load_recipe(recipes / "agentic_curriculum_ppo.yaml"), tmp_path / "ppo").config
    assert recipe.stage == "critic-warmup" and recipe.entrypoint == "cuda_agent.rl.critic_warmup"
    for key in (
        "data.max_prompt_length",
        "data.max_response_length",
        "algorithm.gamma",
        "critic.loss_agg_mode",
        "critic.model.path",
        "critic.ppo_micro_batch_size_per_gpu",
        "actor_rollout_ref.model.path",
    ):
        assert OmegaConf.select(warm, key) == OmegaConf.select(ppo, key), key
    assert warm.actor_rollout_ref.rollout.agent.default_agent_loop == "cuda_agent_replay"
    assert warm.algorithm.lam == 1.0  # the episode's reward is every model token's target (the recipe says why)
    assert warm.actor_rollout_ref.rollout.n == 1 and warm.trainer.save_freq == 1 and warm.trainer.critic_warmup == 0
    loops = yaml.safe_load((tmp_path / "warm" / "agent_loop.yaml").read_text())
    assert {"name": "cuda_agent_replay", "_target_": "cuda_agent.rl.critic_warmup.ReplayAgentLoop"} in loops

    models = [f"actor_rollout_ref.model.path={tiny_model_dir}", f"critic.model.path={tiny_model_dir}"]
    config = plan_training(recipe, tmp_path / "warm_tiny", models).config
    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))


@pytest.mark.parametrize("recipe", ["curriculum_sft.yaml", "agentic_curriculum_sft.yaml", "rft.yaml"])
def test_sft_recipes_take_log_probs_in_blocks_not_a_kernel_a_token(recipe: str, tmp_path: Path) -> None:
    """verl's SFT trainer without flash-attn took each token's log-prob in a Python loop (~6 s a step for the tiny
    curriculum model on an H100, MFU 6e-5); the plan loads the blocked version through verl's own model hook."""
    from verl.utils import torch_functional
    from verl.utils.import_utils import import_external_libs

    from cuda_agent.rl.verl_logprobs import logprobs_in_blocks

    plan = plan_training(load_recipe(Path(__file__).resolve().parents[2] / "recipes" / recipe), tmp_path)
    assert "model.external_lib=[cuda_agent.rl.verl_logprobs]" in plan.command
    assert list(plan.config.model.external_lib) == ["cuda_agent.rl.verl_logprobs"]
    import_external_libs(list(plan.config.model.external_lib))  # what verl's HFModelConfig does in the trainer
    assert torch_functional.logprobs_from_logits_v2 is logprobs_in_blocks
