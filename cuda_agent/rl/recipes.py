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
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.errors import ConfigError
from cuda_agent.rl.config import CudaAgentLoopConfig, JudgeSettings

STAGES = ("single-turn", "collect", "rft", "critic-warmup", "agentic-ppo")
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


class TrainingPlan(BaseModel):
    """A composed, ready-to-launch stage."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    recipe: Recipe
    overrides: list[str] = Field(description="Hydra overrides, in order: the recipe's, then the user's.")
    config: Any = Field(description="verl's composed OmegaConf config.")
    command: list[str] = Field(description="The launch command line.")

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
        return Recipe.model_validate(data)
    except ValueError as exc:
        raise ConfigError(f"recipe {path} is invalid:\n{exc}") from exc


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

    Raises:
        ConfigError: verl is not installed, or an override names a key verl's config lacks.
    """
    overrides = [f"{key}={hydra_value(value)}" for key, value in recipe.overrides.items()]
    if recipe.agent_loop is not None:
        loop_file = out_dir / "agent_loop.yaml"
        out_dir.mkdir(parents=True, exist_ok=True)
        entry = {"name": "cuda_agent", "_target_": "cuda_agent.rl.agent_loop.CudaAgentLoop"}
        settings = recipe.agent_loop.model_copy(update={"work_dir": recipe.agent_loop.work_dir.resolve()})
        # Absolute: verl's agent-loop workers are Ray actors whose working directory is not ours.
        entry.update(json.loads(settings.model_dump_json(exclude_none=True)))
        loop_file.write_text(yaml.safe_dump([entry], sort_keys=False))
        overrides.append(
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={hydra_value(str(loop_file.resolve()))}"
        )
    if recipe.reward_function is not None:
        overrides += _reward_function_overrides(recipe.reward_function)
    overrides += list(user_overrides)
    config = _compose(recipe.verl_config, overrides)
    command = ["python", "-m", recipe.entrypoint, *overrides]
    if recipe.launcher == "torchrun":
        gpus = int(config.trainer.n_gpus_per_node)
        command = ["torchrun", "--standalone", f"--nproc_per_node={gpus}", "-m", recipe.entrypoint, *overrides]
    return TrainingPlan(recipe=recipe, overrides=overrides, config=config, command=command)


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


def _local_missing(value: Any) -> list[str]:
    paths = value if isinstance(value, list | tuple) else [value]
    return [p for p in paths if isinstance(p, str) and _is_local(p) and not Path(p).expanduser().exists()]


def check_plan(plan: TrainingPlan, launching: bool) -> list[str]:
    """Everything wrong with a plan, all at once (empty when it can launch).

    Checks local model and data paths, the sandbox service's /health, batch sizes and, when
    `launching`, that this node has the GPUs the config asks for.
    """
    cfg, problems = plan.config, []
    ppo = plan.recipe.verl_config == "ppo_trainer"
    model_path = cfg.actor_rollout_ref.model.path if ppo else cfg.model.path
    problems += [f"model path {p} does not exist" for p in _local_missing(model_path)]
    for key in ("train_files", "val_files"):
        problems += [f"data.{key}: {p} does not exist" for p in _local_missing(cfg.data.get(key))]
    if ppo and cfg.actor_rollout_ref.actor.ppo_mini_batch_size > cfg.data.train_batch_size:
        problems.append("actor.ppo_mini_batch_size is larger than data.train_batch_size")
    for judged in (plan.recipe.agent_loop, plan.recipe.reward_function):
        if judged is not None and judged.sandbox_url:
            problems += _sandbox_problems(judged.sandbox_url)
    if launching:
        problems += _gpu_problems(int(cfg.trainer.n_gpus_per_node))
        if shutil.which(plan.command[0]) is None:
            problems.append(f"{plan.command[0]} is not on PATH")
    return problems


def _sandbox_problems(url: str) -> list[str]:
    import httpx

    try:
        httpx.get(f"{url.rstrip('/')}/health", timeout=5.0).raise_for_status()
    except httpx.HTTPError as exc:
        return [f"the sandbox service {url} does not answer /health ({exc}); start it with `cuda-agent serve`"]
    return []


def _gpu_problems(wanted: int) -> list[str]:
    import torch

    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return [] if have >= wanted else [f"trainer.n_gpus_per_node={wanted} but this node has {have} GPU(s)"]


def launch(plan: TrainingPlan) -> int:
    """Run the plan's command in the foreground; returns its exit code."""
    import subprocess

    env = dict(os.environ)
    return subprocess.run(plan.command, env=env, check=False).returncode


def describe(plan: TrainingPlan) -> str:
    """The plan as a reader wants it before a launch: stage, command, then the full config."""
    command = " ".join(shlex.quote(part) for part in plan.command)
    return f"# stage: {plan.recipe.stage}: {plan.recipe.description}\n# command: {command}\n{plan.yaml()}"
