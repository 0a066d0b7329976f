"""Run a composed PPO stage on verl's own trainer, on Ray: what `cuda-agent train STAGE` does after its checks.

verl's `python -m verl.trainer.main_ppo` does three things: `auto_set_device`, `validate_config`, then
`run_ppo(config, TaskRunner)`, which starts Ray (`ray.init`) unless it is running, starts the
`TaskRunner` actor and waits for `RayPPOTrainer.fit`. `run_ppo_plan` does the same with the config
we composed (so nothing is parsed twice), after three preparations:

- the rollout `hf` (`cuda_agent.rl.hf_rollout`, transformers, for machines without vLLM/SGLang)
  is loaded in verl's processes through verl's external-library hook
  (`actor_rollout_ref.model.external_lib`), as is `cuda_agent.rl.verl_logprobs` (verl's per-token
  log-probabilities in blocks where flash-attn is missing, in place of a Python loop over tokens);
- `trainer.device=cpu` selects our CPU platform for verl (`cuda_agent.rl.verl_cpu`) in every
  process and starts the local Ray with one logical GPU per trainer rank;
- Ray: `RAY_ADDRESS` (or `+ray_kwargs.ray_init.address=...`) joins a running cluster, exactly as
  verl's own launcher would; without one, a local Ray is started here and stopped at the end;
- relative paths (data files, checkpoint folder; model paths already in `recipes.plan_training`) are made
  absolute: verl's Ray actors do not run in our working directory.

Checkpoints and resume are verl's: every `trainer.save_freq` steps (and at the last step) verl
writes `default_local_dir/global_step_N/` (actor and critic with optimizer and RNG state, and
`data.pt`, the train dataloader's position) and `latest_checkpointed_iteration.txt`. With
`resume=True` verl continues from the latest one (`trainer.resume_mode=auto`): the step counter,
weights, optimizer, RNG and the data cursor, so a run killed in the middle of step N+1 redoes
step N+1 with the batch it had and goes on. Without it a fresh run refuses a folder that holds
checkpoints, instead of silently continuing an older run.

The legacy trainer (`trainer.use_v1=false`, `main_ppo_v0.TaskRunner`) is the one the recipes use:
it needs no TransferQueue and logs our agent-loop manager's metrics (`cuda_agent.rl.verl_compat` says more).
An unset `rollout.max_model_len` is written here, so verl's rollout server and our episodes stop at the same
token (`cuda_agent.rl.preflight`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from cuda_agent.errors import ConfigError

logger = logging.getLogger(__name__)

HF_ROLLOUT_MODULE = "cuda_agent.rl.hf_rollout"
LOGPROBS_MODULE = "cuda_agent.rl.verl_logprobs"  # verl's per-token log-probs in blocks (without flash-attn)
FORWARDED_ENV = ("PYTHONPATH", "VERL_FILE_LOGGER_PATH")
"""This process's environment variables that verl's Ray workers get too (`ray_init.runtime_env.env_vars`)."""


def latest_checkpoint(ckpt_dir: Path | str) -> Path | None:
    """The `global_step_N` folder of the latest complete checkpoint in a checkpoint folder, or None.

    verl's trainers (PPO and SFT alike) write `latest_checkpointed_iteration.txt` after a checkpoint is
    complete, so a `global_step_N` that a kill left half-saved is never the answer.
    """
    tracker = Path(ckpt_dir).expanduser() / "latest_checkpointed_iteration.txt"
    try:
        step = int(tracker.read_text().strip())
    except (OSError, ValueError):
        return None
    folder = tracker.parent / f"global_step_{step}"
    return folder if folder.is_dir() else None


def resume_mode(config: Any, resume: bool) -> str:
    """verl's `trainer.resume_mode` for a launch (PPO and SFT trainers alike): 'auto' to resume, else 'disable'.

    An explicit `resume_path` is the user's choice and stays.

    Raises:
        ConfigError: `trainer.default_local_dir` holds checkpoints and `resume` is False (a fresh run
            would otherwise silently continue, or overwrite, an older one).
    """
    if config.trainer.get("resume_mode") == "resume_path":
        return "resume_path"
    latest = latest_checkpoint(config.trainer.default_local_dir)
    if latest is not None and not resume:
        raise ConfigError(
            f"{config.trainer.default_local_dir} holds checkpoints up to {latest.name}: pass --resume to "
            "continue that run, or set trainer.default_local_dir to a new folder"
        )
    return "auto" if resume else "disable"


def prepare_config(config: Any, resume: bool = False) -> dict[str, str]:
    """Adjust a composed ppo_trainer config for this launch; returns the environment its processes need.

    Args:
        resume: continue from the latest checkpoint in `trainer.default_local_dir` (if there is one).

    An unset `rollout.max_model_len` becomes the context the episodes have (`preflight.resolved_max_model_len`).

    Raises:
        ConfigError: the `hf` rollout with tensor parallelism, the v1 trainer (not supported here), or
            checkpoints in the folder of a run that was not asked to resume.
    """
    from omegaconf import OmegaConf, open_dict

    from cuda_agent.rl.verl_compat import check_version, config_problems

    check_version()
    env: dict[str, str] = {}
    rollout = config.actor_rollout_ref.rollout
    if config.trainer.get("use_v1", False):
        raise ConfigError(config_problems(config)[-1])
    with open_dict(config):
        _absolute_paths(config)
        config.trainer.resume_mode = resume_mode(config, resume)
        libs = OmegaConf.select(config, "actor_rollout_ref.model.external_lib")
        libs = [] if libs is None else list(libs) if OmegaConf.is_list(libs) else [libs]
        wanted = [LOGPROBS_MODULE] + ([HF_ROLLOUT_MODULE] if rollout.name == "hf" else [])
        config.actor_rollout_ref.model.external_lib = [*libs, *(m for m in wanted if m not in libs)]
        if not rollout.get("max_model_len"):
            from cuda_agent.rl.preflight import resolved_max_model_len

            # Said once, for verl's server and our episodes alike: they stop at the same token (CudaAgentLoop).
            rollout.max_model_len = resolved_max_model_len(config)
        if rollout.name == "hf":
            if rollout.tensor_model_parallel_size != 1:
                raise ConfigError(
                    "the hf rollout runs one replica per GPU: set actor_rollout_ref.rollout.tensor_model_parallel_size=1"
                )
        if config.trainer.device == "cpu":
            from cuda_agent.rl.verl_cpu import ENV

            env.update(ENV)
            ray_init = config.ray_kwargs.ray_init
            gpus = int(config.trainer.n_gpus_per_node) * int(config.trainer.nnodes)
            ray_init.num_gpus = ray_init.get("num_gpus") or gpus  # logical: one per trainer rank
            # Logical CPUs for verl's placement (3 per trainer rank), the task runner and the agent-loop workers.
            ray_init.num_cpus = ray_init.get("num_cpus") or 4 * gpus + 8
        ray_init = config.ray_kwargs.ray_init
        if ray_init.get("runtime_env") is None:
            ray_init.runtime_env = {}
        if ray_init.runtime_env.get("env_vars") is None:
            ray_init.runtime_env.env_vars = {}
        if config.trainer.device == "cpu":
            ray_init.runtime_env.worker_process_setup_hook = "cuda_agent.rl.verl_cpu.join_process_group"
        env_vars = ray_init.runtime_env.env_vars
        for key, value in env.items():
            env_vars[key] = value
        # Ray's workers on a joined cluster do not inherit this process's environment: the agent's shell and our
        # workers import cuda_agent (keep this checkout importable), and verl's file logger writes where we said.
        for key in FORWARDED_ENV:
            if os.environ.get(key):
                env_vars.setdefault(key, os.environ[key])
    return env


def _absolute_paths(config: Any) -> None:
    trainer, data = config.trainer, config.data
    for key in ("default_local_dir", "rollout_data_dir", "validation_data_dir"):
        if trainer.get(key):
            trainer[key] = str(Path(trainer[key]).expanduser().absolute())
    for key in ("train_files", "val_files"):
        files = data.get(key)
        if files is None:
            continue
        paths = [files] if isinstance(files, str) else list(files)
        # Only files that exist here: anything else (hdfs://, a hub name) is verl's to resolve.
        paths = [str(Path(p).absolute()) if Path(p).exists() else p for p in paths]
        data[key] = paths[0] if isinstance(files, str) else paths


def run_ppo_plan(config: Any, task_runner_class: Any = None, resume: bool = False) -> int:
    """Train with verl's RayPPOTrainer on `config` (a composed ppo_trainer config); returns 0 when it finishes.

    `task_runner_class` replaces verl's `TaskRunner` (the critic warm-up's frozen-actor runner);
    `resume` continues from the latest checkpoint (see the module docstring).

    Raises:
        ConfigError: see `prepare_config`; verl's own validation errors pass through.
    """
    import ray

    env = prepare_config(config, resume=resume)
    os.environ.update(env)
    if config.trainer.device == "cpu":
        from cuda_agent.rl.verl_cpu import use_cpu_platform

        use_cpu_platform()
    if config.actor_rollout_ref.rollout.name == "hf":
        import cuda_agent.rl.hf_rollout  # noqa: F401  (registers 'hf' in this process too)
    from verl.trainer.main_ppo import run_ppo
    from verl.trainer.main_ppo_v0 import TaskRunner
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    auto_set_device(config)
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    started = not ray.is_initialized()
    try:
        run_ppo(config, task_runner_class=task_runner_class or TaskRunner)
    finally:
        if started and ray.is_initialized():
            ray.shutdown()
    return 0
