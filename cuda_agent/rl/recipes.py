"""Training recipes: one YAML per paper stage, composed with verl's own config and checked before launch.

A recipe names verl's config (`ppo_trainer` or `sft_trainer_engine`), the entry point that runs it,
and the keys it overrides, in verl's dotted names, so every key is checked against the installed
verl: composing fails on a key verl does not have. Recipes that roll out our agent also carry
`agent_loop` (the `CudaAgentLoopConfig` fields), which is written to verl's agent-loop YAML.

    recipe = load_recipe(bundled_recipe("agentic-ppo"))
    plan = plan_training(recipe, out_dir, ["data.train_files=/data/ops6k_train.parquet"])
    problems = check_plan(plan, launching=False)   # model path, data, sandbox, GPUs, batch sizes
    print(plan.yaml())

Recipes that judge one answer per prompt (single-turn) carry `reward_function` (`JudgeSettings`),
which become the keyword arguments of `cuda_agent.rl.single_turn.compute_score`. An override key
may start with `+` (hydra's "add"), for keys verl reads but its YAML does not list.

verl and hydra are imported only when a recipe is composed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.errors import ConfigError
from cuda_agent.rl import STAGES
from cuda_agent.rl.config import ClusterSettings, CudaAgentLoopConfig, JudgeSettings
from cuda_agent.rl.report import launch_number, metrics_files
from cuda_agent.sandbox.workspace_commands import SANDBOX_URL_ENV

RECIPES_DIR = Path(__file__).resolve().parents[2] / "recipes"
_PLAIN = re.compile(r"^[\w./:@+-]+$")


class Recipe(BaseModel):
    """One training stage: which verl config and entry point, and what it overrides."""

    model_config = ConfigDict(extra="forbid")

    stage: Literal["single-turn", "collect", "rft", "critic-warmup", "agentic-ppo"] = Field(description="Paper stage.")
    description: str = Field(default="", description="What the stage does, for the printed plan.")
    verl_config: Literal["ppo_trainer", "sft_trainer_engine"] = Field(description="verl's config to compose with.")
    entrypoint: str = Field(description="Module run to launch, e.g. verl.trainer.main_ppo.")
    launcher: Literal["python", "torchrun"] = Field(default="python", description="torchrun for verl's SFT trainer.")
    agent_loop: CudaAgentLoopConfig | None = Field(default=None, description="Our agent loop's settings, if used.")
    reward_function: JudgeSettings | None = Field(
        default=None, description="Judge the one response with cuda_agent.rl.single_turn.compute_score, so set up."
    )
    overrides: dict[str, Any] = Field(default_factory=dict, description="verl config keys (dotted) and values.")
    cluster: ClusterSettings | None = Field(
        default=None, description="The node's split between training and the judge, checked by the dry run."
    )
    hf_config: Path | None = Field(
        default=None,
        description="The config.json of the model the recipe is shaped for (shipped beside it, relative to the "
        "recipe): the dry run checks context and GPU split against it while the model folder does not exist yet.",
    )


class TrainingPlan(BaseModel):
    """A composed, ready-to-launch stage."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    recipe: Recipe
    overrides: list[str] = Field(description="Hydra overrides, in order: the recipe's, then the user's.")
    config: Any = Field(description="verl's composed OmegaConf config.")
    command: list[str] = Field(description="The launch command line.")
    out_dir: Path = Field(description="The stage's folder: the agent-loop YAML and each launch's metrics file.")

    def yaml(self) -> str:
        from omegaconf import OmegaConf

        return OmegaConf.to_yaml(self.config)


def bundled_recipe(stage: str) -> Path:
    """The default recipe file of a stage (recipes/<stage>.yaml in the checkout)."""
    if stage not in STAGES:
        raise ConfigError(f"unknown stage {stage!r}; choose one of {', '.join(STAGES)}")
    return RECIPES_DIR / f"{stage.replace('-', '_')}.yaml"


def load_recipe(path: Path) -> Recipe:
    """Read and validate a recipe YAML.

    Raises:
        ConfigError: the file is missing, not YAML, or has unknown or mistyped fields (all listed).
    """
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read the recipe {path}: {exc}") from exc
    try:
        recipe = Recipe.model_validate(data)
    except ValueError as exc:
        raise ConfigError(f"recipe {path} is invalid:\n{exc}") from exc
    if recipe.hf_config is not None:
        recipe.hf_config = (Path(path).parent / recipe.hf_config).resolve()
    return recipe


def hydra_value(value: Any) -> str:
    """A Python value as a hydra override value (quoted where the grammar needs it)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(hydra_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{key}:{hydra_value(item)}" for key, item in value.items()) + "}"
    text = str(value)
    return text if _PLAIN.match(text) else "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def plan_training(recipe: Recipe, out_dir: Path, user_overrides: list[str] = ()) -> TrainingPlan:
    """Compose verl's config with the recipe's and the user's overrides; write the agent-loop YAML.

    The agent-loop YAML is written after composing, with `max_turns` taken from the composed
    `actor_rollout_ref.rollout.multi_turn.max_assistant_turns` when that is set, so a user's
    `--set ...max_assistant_turns=N` is what the episodes get (the YAML would otherwise win).

    Raises:
        ConfigError: verl is not installed, or an override names a key verl's config lacks.
    """
    overrides = [f"{key}={hydra_value(value)}" for key, value in recipe.overrides.items()]
    loop_file = out_dir / "agent_loop.yaml"
    writes_loops = recipe.agent_loop is not None or recipe.stage == "critic-warmup"
    if writes_loops:
        overrides.append(
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={hydra_value(str(loop_file.resolve()))}"
        )
    recipe = _with_sandbox_url(recipe)
    if recipe.reward_function is not None:
        overrides += _reward_function_overrides(recipe.reward_function)
    overrides += list(user_overrides)
    config = _compose(recipe.verl_config, overrides)
    if recipe.verl_config == "sft_trainer_engine":
        overrides += _sft_logprobs_in_blocks(config)
    overrides += _absolute_model_paths(config)
    if writes_loops:
        _write_agent_loops(recipe, config, loop_file)
    command = ["python", "-m", recipe.entrypoint, *overrides]
    if recipe.launcher == "torchrun":
        gpus = int(config.trainer.n_gpus_per_node)
        module = recipe.entrypoint
        if module == "verl.trainer.sft_trainer" and config.trainer.get("device") == "cpu":
            module = "cuda_agent.rl.sft_cpu"  # verl's SFT trainer with a gloo process group (see that module)
        command = ["torchrun", "--standalone", f"--nproc_per_node={gpus}", "-m", module, *overrides]
    return TrainingPlan(recipe=recipe, overrides=overrides, config=config, command=command, out_dir=out_dir)


def _sft_logprobs_in_blocks(config: Any) -> list[str]:
    """verl's SFT trainer takes each token's log-probability in a Python loop of one kernel a token where
    flash-attn is missing (`cuda_agent.rl.verl_logprobs`, which PPO's workers load the same way): ~6 s a step
    for the tiny curriculum model's 24 rows of ~2,000 tokens on an H100 (MFU 6e-5). The model
    config's external-library hook loads the blocked version in the trainer's process; the override goes
    into the launch command and the composed config alike."""
    from omegaconf import OmegaConf, open_dict

    from cuda_agent.rl.launch import LOGPROBS_MODULE

    libs = OmegaConf.select(config, "model.external_lib")
    libs = [] if libs is None else list(libs) if OmegaConf.is_list(libs) else [libs]
    if LOGPROBS_MODULE in libs:
        return []
    libs.append(LOGPROBS_MODULE)
    with open_dict(config):
        config.model.external_lib = libs
    return [f"model.external_lib={hydra_value(libs)}"]


MODEL_PATH_KEYS = tuple(
    f"{section}.{key}"
    for section in ("actor_rollout_ref.model", "critic.model", "model")
    for key in ("path", "tokenizer_path", "hf_config_path", "lora_adapter_path")
) + ("reward.reward_model.model_path",)
"""Where verl's PPO and SFT configs name a model (or its tokenizer, config or adapter) to load."""


def _absolute_model_paths(config: Any) -> list[str]:
    """Make each relative model path of `config` that exists here absolute; returns the overrides that say so.

    verl's Ray workers (and anything a joined cluster starts) do not run in our working folder, so
    `checkpoints/rft/hf` would name another folder there. A hub id ('Qwen/Qwen3-8B') exists nowhere
    here and stays as it is; so does a path that does not exist yet (check_plan reports it).
    The overrides go at the end of the plan's, so the launch command (torchrun) says the same as `config`.
    """
    from omegaconf import OmegaConf, open_dict

    overrides = []
    for key in MODEL_PATH_KEYS:
        value = OmegaConf.select(config, key, default=None)
        if not isinstance(value, str) or Path(value).is_absolute() or not Path(value).expanduser().exists():
            continue
        absolute = str(Path(value).expanduser().absolute())
        with open_dict(config):
            OmegaConf.update(config, key, absolute)
        overrides.append(f"{key}={hydra_value(absolute)}")
    return overrides


def _with_sandbox_url(recipe: Recipe) -> Recipe:
    """The recipe with $CUDA_AGENT_SANDBOX_URL as the judge's `sandbox_url` where it names none.

    Written into the plan (reward_kwargs, the agent-loop YAML) rather than left to the environment: on a
    joined Ray cluster verl's workers do not inherit this process's environment, and would judge locally.
    """
    url = os.environ.get(SANDBOX_URL_ENV)
    if not url:
        return recipe
    update = {
        field: judged.model_copy(update={"sandbox_url": url})
        for field in ("agent_loop", "reward_function")
        if (judged := getattr(recipe, field)) is not None and not judged.sandbox_url
    }
    return recipe.model_copy(update=update)


def _write_agent_loops(recipe: Recipe, config: Any, loop_file: Path) -> None:
    entries: list[dict[str, Any]] = []
    if recipe.agent_loop is not None:
        turns = config.actor_rollout_ref.rollout.multi_turn.get("max_assistant_turns")
        update: dict[str, Any] = {"work_dir": recipe.agent_loop.work_dir.resolve()}
        # Absolute: verl's agent-loop workers are Ray actors whose working directory is not ours.
        if turns:
            update["max_turns"] = int(turns)
        settings = recipe.agent_loop.model_copy(update=update)
        entry = {"name": "cuda_agent", "_target_": "cuda_agent.rl.agent_loop.CudaAgentLoop"}
        entries.append({**entry, **json.loads(settings.model_dump_json(exclude_none=True))})
    if recipe.stage == "critic-warmup":
        entries.append({"name": "cuda_agent_replay", "_target_": "cuda_agent.rl.critic_warmup.ReplayAgentLoop"})
    loop_file.parent.mkdir(parents=True, exist_ok=True)
    loop_file.write_text(yaml.safe_dump(entries, sort_keys=False))


def _reward_function_overrides(settings: JudgeSettings) -> list[str]:
    # Absolute work_dir: verl's reward workers are Ray actors whose working directory is not ours.
    settings = settings.model_copy(update={"work_dir": settings.work_dir.resolve()})
    kwargs = json.loads(settings.model_dump_json(exclude_none=True))
    return [
        "reward.custom_reward_function.path=pkg://cuda_agent.rl.single_turn",
        "reward.custom_reward_function.name=compute_score",
        f"+reward.custom_reward_function.reward_kwargs={hydra_value(kwargs)}",
    ]


def _compose(config_name: str, overrides: list[str]) -> Any:
    try:
        import verl
        from hydra import compose, initialize_config_dir
        from hydra.errors import HydraException
        from omegaconf.errors import OmegaConfBaseException
    except ImportError as exc:
        raise ConfigError("training needs verl: pip install -e '.[rl]'") from exc
    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    try:
        with initialize_config_dir(config_dir=config_dir, version_base=None):
            return compose(config_name=config_name, overrides=overrides)
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(f"verl {verl.__version__} rejects the config: {exc}") from exc


def _is_local(path: str) -> bool:
    # 'Qwen/Qwen3-8B' is a hub name; '/x', './x', '~/x' and 'runs/data/x.parquet' are files.
    return path[:1] in "/.~" or path.count("/") >= 2 or path.endswith(".parquet")


def _paths(value: Any) -> list[Any]:
    """One path or a list of them (a list, or the ListConfig of a composed config) as a list."""
    return list(value) if isinstance(value, Sequence) and not isinstance(value, str) else [value]


def _local_missing(value: Any) -> list[str]:
    paths = _paths(value)
    return [p for p in paths if isinstance(p, str) and _is_local(p) and not Path(p).expanduser().exists()]


VERL_PLACEHOLDER_MODEL = "~/models/deepseek-llm-7b-chat"
"""verl's default model path (its critic's too): a plan that still names it has forgotten to set one."""
HANDS_ON = ("single-turn", "rft", "critic-warmup", "agentic-ppo")
"""Stages whose checkpoint the next stage starts from: they must save one."""


def check_plan(plan: TrainingPlan, launching: bool = True) -> list[str]:
    """Everything wrong with a plan, all at once (empty when it can launch).

    Checks local model paths (the actor's, and the critic's where verl starts one), data paths,
    batch sizes, `trainer.save_freq` on stages whose checkpoint is handed on, that judging does not
    share the training GPUs, that a reward function's dropped samples are masked (our agent-loop
    manager), that the agent-loop YAML agrees with `max_assistant_turns`, prompts
    longer than `data.max_prompt_length` when verl would not drop them, verl's own config
    validation (where the models can be read), the sandbox service's /health and this node's GPUs.

    Args:
        launching: also check that the launch command is on PATH (a dry run only prints it).
    """
    cfg, recipe, problems = plan.config, plan.recipe, []
    ppo = recipe.verl_config == "ppo_trainer"
    models = [cfg.actor_rollout_ref.model.path] if ppo else [cfg.model.path]
    if ppo and _needs_critic(cfg):
        models.append(cfg.critic.model.path)
        if cfg.critic.model.path == VERL_PLACEHOLDER_MODEL:
            problems.append(
                f"critic.model.path is verl's placeholder {VERL_PLACEHOLDER_MODEL}: set it (or critic.enable=false)"
            )
    missing = sorted({p for model in models for p in _local_missing(model)})
    problems += [f"model path {p} does not exist" for p in missing]
    uncached = sorted({m for m in models if not _is_local(str(m)) and not _hub_cached(str(m))})
    # huggingface_hub >= 1.0 has no `huggingface-cli download`; `hf` is its command line
    problems += [f"model {m} is not in the local Hugging Face cache: `hf download {m}`" for m in uncached]
    for key in ("train_files", "val_files"):
        problems += [f"data.{key}: {p} does not exist" for p in _local_missing(cfg.data.get(key))]
    if ppo and cfg.actor_rollout_ref.actor.ppo_mini_batch_size > cfg.data.train_batch_size:
        problems.append("actor.ppo_mini_batch_size is larger than data.train_batch_size")
    if recipe.stage in HANDS_ON and str(cfg.trainer.get("save_freq", -1)) in ("-1", "0", "None"):
        problems.append(
            f"trainer.save_freq is {cfg.trainer.get('save_freq')}: stage {recipe.stage} saves nothing to hand on"
        )
    if recipe.stage == "critic-warmup" and recipe.entrypoint != "cuda_agent.rl.critic_warmup":
        problems.append(
            "the critic warm-up must run cuda_agent.rl.critic_warmup (verl's own warm-up updates the actor)"
        )
    problems += _judging_problems(recipe)
    if ppo and recipe.reward_function is not None:
        problems += _manager_problems(cfg)
    if ppo:
        problems += _turn_problems(cfg)
        problems += prompt_length_problems(cfg, models[0])
        problems += _scale_problems(cfg, recipe)
        if not missing and not uncached:  # verl's validation reads the models' configs
            problems += _verl_validation_problems(cfg)
    for judged in (recipe.agent_loop, recipe.reward_function):
        if judged is not None and judged.sandbox_url:
            problems += _sandbox_problems(judged.sandbox_url, judged.sandbox_token, cfg, recipe.cluster)
    if cfg.trainer.get("device") != "cpu":  # trainer.device=cpu: verl on the CPU (cuda_agent.rl.verl_cpu)
        problems += _gpu_problems(int(cfg.trainer.n_gpus_per_node) * int(cfg.trainer.get("nnodes", 1) or 1))
    # PPO stages and the critic warm-up run in this process (launch()); only the others' commands must be on PATH.
    in_process = recipe.entrypoint in ("verl.trainer.main_ppo", "cuda_agent.rl.critic_warmup")
    if launching and not in_process and shutil.which(plan.command[0]) is None:
        problems.append(f"{plan.command[0]} is not on PATH")
    return problems


def _hub_cached(name: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(name, "config.json"), str)


def _needs_critic(cfg: Any) -> bool:
    from verl.trainer.ppo.utils import need_critic

    return bool(need_critic(cfg))


def _judging_problems(recipe: Recipe) -> list[str]:
    # Without a service each episode judges in a LocalPool on the GPUs that rollout and FSDP use: timings near
    # the 5 % reward thresholds get noisy and the judge's out-of-memory errors land on training's memory.
    judged = recipe.agent_loop or recipe.reward_function
    if judged is None or judged.device != "cuda" or judged.share_training_gpus:
        return []
    if judged.sandbox_url:
        return []
    return [
        "no sandbox_url: candidates would be judged on the training GPUs; start `cuda-agent serve` on GPUs of "
        "its own and set sandbox_url (or share_training_gpus: true for a one-GPU demo, with noisy timings)"
    ]


AGENT_LOOP_MANAGER = "cuda_agent.rl.agent_loop.CudaAgentLoopManager"
"""The agent-loop manager whose workers mask dropped single-turn samples out of the batch (`metrics.mask_our_failure`)."""


def _manager_problems(cfg: Any) -> list[str]:
    # compute_score returns score 0 for our failures; only this manager masks them, else they train as reward 0.
    if cfg.actor_rollout_ref.rollout.agent.get("agent_loop_manager_class") == AGENT_LOOP_MANAGER:
        return []
    return [
        "reward_function is set but actor_rollout_ref.rollout.agent.agent_loop_manager_class is not "
        f"{AGENT_LOOP_MANAGER}: samples our judge failed on would train as reward 0; add "
        f"+actor_rollout_ref.rollout.agent.agent_loop_manager_class: {AGENT_LOOP_MANAGER}"
    ]


def _turn_problems(cfg: Any) -> list[str]:
    turns = cfg.actor_rollout_ref.rollout.multi_turn.get("max_assistant_turns")
    path = cfg.actor_rollout_ref.rollout.agent.get("agent_loop_config_path")
    if not turns or not path or not Path(path).exists():
        return []
    entries = yaml.safe_load(Path(path).read_text()) or []
    return [
        f"{path}: max_turns {entry['max_turns']} would override multi_turn.max_assistant_turns={turns}"
        for entry in entries
        if entry.get("name") == "cuda_agent" and entry.get("max_turns") not in (None, int(turns))
    ]


def prompt_length_problems(cfg: Any, model_path: str) -> list[str]:
    """Training prompts longer than `data.max_prompt_length` tokens, when verl would not drop them.

    verl pads prompts but never truncates them (`data.truncation: error`), so one overlong prompt
    fails the batch unless `data.filter_overlong_prompts` drops it first. Measured with the model's
    tokenizer and chat template, as verl does; skipped when the tokenizer or the data is not local.
    """
    if cfg.data.get("filter_overlong_prompts") or cfg.data.get("truncation") != "error":
        return []
    lengths = prompt_lengths(cfg, model_path)
    limit = int(cfg.data.max_prompt_length)
    return [
        f"{path}: {over} of {len(found)} prompts are longer than data.max_prompt_length={limit} tokens; "
        "set data.filter_overlong_prompts=true or shorten them"
        for path, found in lengths.items()
        if (over := sum(1 for n in found if n > limit))
    ]


def prompt_lengths(cfg: Any, model_path: str) -> dict[str, list[int]]:
    """Token count of every row's chat prompt, per local data file (empty without a local tokenizer)."""
    if _local_missing(model_path) or not _is_local(str(model_path)):
        return {}
    import pyarrow.parquet as pq
    from transformers import AutoTokenizer
    from verl.utils.tokenizer.tokenizer import normalize_token_ids

    tokenizer = AutoTokenizer.from_pretrained(str(Path(model_path).expanduser()))
    key, out = cfg.data.get("prompt_key", "prompt"), {}
    for split in ("train_files", "val_files"):
        for path in _paths(cfg.data.get(split)):
            if not isinstance(path, str) or path in out or not Path(path).expanduser().exists():
                continue
            prompts = pq.read_table(Path(path).expanduser(), columns=[key]).column(key).to_pylist()
            out[path] = [
                len(
                    normalize_token_ids(
                        tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
                    )
                )
                for messages in prompts
            ]
    return out


def _verl_validation_problems(cfg: Any) -> list[str]:
    from verl.trainer.ppo.utils import need_reference_policy
    from verl.utils.config import validate_config

    try:
        validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=_needs_critic(cfg))
    except Exception as exc:  # verl validates with asserts, ValueErrors and hydra instantiation errors alike
        return [f"verl's config validation fails: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"]
    return []


def _scale_problems(cfg: Any, recipe: Recipe) -> list[str]:
    from cuda_agent.rl import preflight, verl_compat

    configs = preflight.model_configs(cfg, recipe.hf_config)
    problems = preflight.context_problems(cfg, configs) if configs else []
    critic = _needs_critic(cfg) and not cfg.trainer.get("val_only")
    problems += preflight.split_problems(cfg, configs[1] if configs else None, recipe.cluster, critic)
    problems += preflight.long_run_problems(cfg, recipe.stage, recipe.agent_loop is not None)
    return problems + verl_compat.config_problems(cfg)


def _sandbox_problems(url: str, token: str | None, cfg: Any, cluster: ClusterSettings | None) -> list[str]:
    import httpx

    from cuda_agent.rl import preflight

    try:
        httpx.get(f"{url.rstrip('/')}/health", timeout=5.0).raise_for_status()
    except httpx.HTTPError as exc:
        return [f"the sandbox service {url} does not answer /health ({exc}); start it with `cuda-agent serve`"]
    stats = preflight.fetch_stats(url, token) if cluster is not None else None
    return preflight.capacity_problems(cfg, cluster, stats, url) if stats and cluster else []


def _gpu_problems(wanted: int) -> list[str]:
    import torch

    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return [] if have >= wanted else [f"trainer.n_gpus_per_node={wanted} but this node has {have} GPU(s)"]


def metrics_file(out_dir: Path) -> Path:
    """The next free `metrics.<n>.jsonl` in `out_dir` (n from 0), as an absolute path.

    One file per launch: verl's file logger opens its file for writing, so a `--resume` into the same file
    would wipe the killed run's steps. `cuda-agent train report OUT_DIR` reads them all, in order.
    """
    # The report's naming rule, so the report reads the launches in the order they were made.
    taken = [n for path in metrics_files(out_dir) if (n := launch_number(path)) is not None]
    return (Path(out_dir) / f"metrics.{max(taken, default=-1) + 1}.jsonl").absolute()


def launch(plan: TrainingPlan, resume: bool = False) -> int:
    """Run the plan in the foreground; returns its exit code.

    PPO stages run verl's own trainer on Ray from this process (`cuda_agent.rl.launch`, which starts a
    local Ray unless RAY_ADDRESS names a cluster; `resume` continues from the latest checkpoint);
    the others run the plan's command. Either way verl's file logger writes `metrics_file(plan.out_dir)`.
    """
    import subprocess

    plan.out_dir.mkdir(parents=True, exist_ok=True)
    os.environ["VERL_FILE_LOGGER_PATH"] = str(metrics_file(plan.out_dir))
    if plan.recipe.entrypoint == "verl.trainer.main_ppo":
        from cuda_agent.rl.launch import run_ppo_plan

        return run_ppo_plan(plan.config, resume=resume)
    if plan.recipe.entrypoint == "cuda_agent.rl.critic_warmup":
        from cuda_agent.rl.critic_warmup import frozen_actor_task_runner
        from cuda_agent.rl.launch import run_ppo_plan

        return run_ppo_plan(plan.config, task_runner_class=frozen_actor_task_runner(), resume=resume)

    from cuda_agent.rl.launch import resume_mode

    # verl's SFT trainer defaults to resume_mode=auto: without this a folder with checkpoints silently continues.
    mode = f"trainer.resume_mode={resume_mode(plan.config, resume)}"
    command = [part for part in plan.command if not part.startswith("trainer.resume_mode=")]
    return subprocess.run([*command, mode], check=False).returncode


def describe(plan: TrainingPlan) -> str:
    """The plan as a reader wants it before a launch: stage, command, then the full config."""
    command = " ".join(shlex.quote(part) for part in plan.command)
    return f"# stage: {plan.recipe.stage}: {plan.recipe.description}\n# command: {command}\n{plan.yaml()}"
