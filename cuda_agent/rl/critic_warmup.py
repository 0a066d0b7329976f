"""Stage 4, the critic warm-up: value pre-training on the collected trajectories while the actor stays frozen.

verl's own `trainer.critic_warmup` does not do what the paper does, in two ways: it trains the
critic on fresh rollouts of the current policy, and it updates the actor at its last warm-up step
(the trainer's `critic_warmup > global_steps` test is already false there); it also saves no
checkpoint while warming up. This stage fixes both with verl's own extension points:

- `ReplayAgentLoop` (agent-loop name `cuda_agent_replay`) answers each row of
  `cuda-agent train critic-data` (one row per collected episode; with `--from-sft`, per scripted
  episode of the agentic curriculum's sft.parquet) with that episode's exact tokens
  and reward from its `tokens.json`, instead of generating: the value model learns the returns of
  the trajectories the collect stage produced.
- `FrozenActorTrainer` is verl's legacy `RayPPOTrainer` whose actor update does nothing, so every
  step computes values, GAE (the recipe's gamma and lambda: recipes/critic_warmup.yaml 1 and 0.95,
  recipes/agentic_critic_warmup.yaml 1 and 1) and the critic update, then checkpoints at
  `trainer.save_freq` and the last step like any PPO step (the critic lands in
  `global_step_N/critic`, the actor is saved unchanged). Run it with this module as the entry point
  (`cuda-agent train critic-warmup`, or `python -m cuda_agent.rl.critic_warmup` + verl's PPO
  overrides): `frozen_actor_task_runner()` installs the trainer inside the Ray task runner's own
  process, then runs verl's `TaskRunner` unchanged.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from cuda_agent.errors import ConfigError
from cuda_agent.rl.rft import TOKENS_FILE, TokenRecord

REPLAY_LOOP = "cuda_agent_replay"


def replay_record(row: dict[str, Any], prompt_length: int, response_length: int) -> TokenRecord:
    """The token record a replay row names (`extra_info.tokens`: the episode folder), cut to the rollout budget.

    Raises:
        ConfigError: the row names no episode, or its tokens.json is missing, unreadable, or has no reward
            (rebuild the data with `cuda-agent train critic-data`).
    """
    folder = (row.get("extra_info") or {}).get("tokens")
    if not folder:
        raise ConfigError("a critic warm-up row has no extra_info.tokens; write the data with `train critic-data`")
    path = Path(folder) / TOKENS_FILE
    try:
        record = TokenRecord.model_validate_json(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path} ({exc}); rebuild the data with `cuda-agent train critic-data`") from exc
    if record.reward is None:
        raise ConfigError(f"{path} has no reward (a dropped sample); rebuild the data with `train critic-data`")
    if len(record.prompt_ids) > prompt_length:
        raise ConfigError(f"{path}: the prompt has {len(record.prompt_ids)} tokens, over data.max_prompt_length")
    mask = record.response_mask[:response_length]
    # The reward sits on the last response token: end on a model token, as the agent loop does.
    end = max((i + 1 for i, m in enumerate(mask) if m), default=len(mask))
    return record.model_copy(update={"response_ids": record.response_ids[:end], "response_mask": mask[:end]})


@functools.cache
def _verl_classes() -> tuple[Any, Any]:
    # verl is imported only when the stage runs (this module's docstring and `replay_record` stay light).
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register
    from verl.protocol import DataProto
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    class ReplayAgentLoop(AgentLoopBase):
        """Hands verl a collected episode's tokens and reward instead of generating (no model call)."""

        def __init__(self, *args: Any, name: str | None = None, tools: Any = None, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)

        async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
            rollout = self.rollout_config
            record = replay_record(kwargs, int(rollout.prompt_length), int(rollout.response_length))
            return AgentLoopOutput(
                prompt_ids=record.prompt_ids,
                response_ids=record.response_ids,
                response_mask=record.response_mask,
                reward_score=record.reward,
                num_turns=2,
                metrics=AgentLoopMetrics(),
                extra_fields={"reward_extra_info": {"score": record.reward}},
            )

    class FrozenActorTrainer(RayPPOTrainer):
        """verl's trainer with the actor update switched off: only the critic learns; checkpoints as usual."""

        def _update_actor(self, batch: Any) -> Any:
            return DataProto(meta_info={"metrics": {}})

    # verl's registry records module + qualname for hydra to import; `<locals>` cannot be, the module's name can
    # (through `__getattr__` below).
    ReplayAgentLoop.__qualname__ = ReplayAgentLoop.__name__
    register(REPLAY_LOOP)(ReplayAgentLoop)
    return ReplayAgentLoop, FrozenActorTrainer


def __getattr__(name: str) -> Any:
    # `_target_: cuda_agent.rl.critic_warmup.ReplayAgentLoop` in the agent-loop YAML resolves through here.
    if name in ("ReplayAgentLoop", "FrozenActorTrainer"):
        replay, trainer = _verl_classes()
        return replay if name == "ReplayAgentLoop" else trainer
    raise AttributeError(name)


@functools.cache
def frozen_actor_task_runner() -> Any:
    """verl's legacy `TaskRunner` as a Ray actor that builds `FrozenActorTrainer` in place of `RayPPOTrainer`."""
    import ray

    @ray.remote(num_cpus=1)
    class FrozenActorTaskRunner:
        def run(self, config: Any) -> None:
            from cuda_agent.rl.verl_compat import replace_legacy_trainer

            # In the task runner's own process, where verl builds the trainer.
            v0 = replace_legacy_trainer(_verl_classes()[1])
            # The TaskRunner of the module imported here: one this class held would travel with it (cloudpickle, by
            # value), its `run` with a copy of the module's globals that still names verl's own trainer.
            v0.TaskRunner.__ray_metadata__.modified_class().run(config)

    return FrozenActorTaskRunner


def main() -> None:
    """`python -m cuda_agent.rl.critic_warmup KEY=VALUE ...`: verl's PPO launch with the frozen-actor trainer."""
    import hydra
    import verl

    from cuda_agent.rl.launch import run_ppo_plan

    @hydra.main(
        config_path=str(Path(verl.__file__).parent / "trainer" / "config"), config_name="ppo_trainer", version_base=None
    )
    def _main(config: Any) -> None:
        from verl.trainer.ppo.utils import need_critic

        if not need_critic(config):
            raise ConfigError("the critic warm-up needs the critic: set algorithm.adv_estimator=gae")
        run_ppo_plan(config, task_runner_class=frozen_actor_task_runner())

    _main()


if __name__ == "__main__":
    main()
