"""The critic warm-up: collected episodes replayed as verl rollouts (no generation), and a trainer that
never updates the actor."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from cuda_agent.errors import ConfigError
from cuda_agent.rl.critic_warmup import replay_record
from cuda_agent.rl.rft import TokenRecord

pytest.importorskip("verl", reason="verl is not installed (pip install -e '.[rl]')")

from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import DictConfigWrap  # noqa: E402

RECORD = TokenRecord(prompt_ids=[1, 2, 3], response_ids=[10, 11, 12, 13, 14], response_mask=[1, 1, 0, 0, 1], reward=2.0)


def test_replay_record_cuts_to_the_budget_and_ends_on_a_model_token(tmp_path: Path) -> None:
    RECORD.write(tmp_path)
    row = {"extra_info": {"tokens": str(tmp_path)}}
    assert replay_record(row, 8, 100) == RECORD
    cut = replay_record(row, 8, 4)  # the tool tokens at 2-3 are trailing once cut at 4: the reward's token is 11
    assert (cut.response_ids, cut.response_mask, cut.reward) == ([10, 11], [1, 1], 2.0)
    with pytest.raises(ConfigError, match="over data.max_prompt_length"):
        replay_record(row, 2, 100)
    RECORD.model_copy(update={"reward": None}).write(tmp_path)
    with pytest.raises(ConfigError, match="no reward"):
        replay_record(row, 8, 100)
    with pytest.raises(ConfigError, match="critic-data"):
        replay_record({"extra_info": {"tokens": str(tmp_path / "gone")}}, 8, 100)


def test_replay_agent_loop_hands_verl_the_collected_tokens_and_reward(tiny_tokenizer: Any, tmp_path: Path) -> None:
    from cuda_agent.rl.critic_warmup import ReplayAgentLoop

    RECORD.write(tmp_path)
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 8, "response_length": 100}}})
    loop = ReplayAgentLoop(
        trainer_config=DictConfigWrap(config),
        server_manager=None,  # never asked: nothing is generated
        tokenizer=tiny_tokenizer,
        processor=None,
        dataset_cls=None,
        data_config=DictConfigWrap(OmegaConf.create({})),
        hf_model_type="qwen2",
        name="cuda_agent_replay",
    )
    output = asyncio.run(loop.run({}, extra_info={"tokens": str(tmp_path)}))
    assert (output.prompt_ids, output.response_ids, output.response_mask) == (
        [1, 2, 3],
        RECORD.response_ids,
        RECORD.response_mask,
    )
    assert output.reward_score == 2.0 and output.as_dict()["rm_scores"][-1].item() == 2.0


def test_the_critic_warmups_task_runner_builds_the_frozen_actor_trainer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner swaps the trainer class verl's TaskRunner.run builds (main_ppo_v0.RayPPOTrainer), then runs it."""
    pytest.importorskip("ray")
    import verl.trainer.main_ppo_v0 as v0

    from cuda_agent.rl.critic_warmup import FrozenActorTrainer, frozen_actor_task_runner

    built = []
    monkeypatch.setattr(v0, "RayPPOTrainer", v0.RayPPOTrainer)  # restored afterwards: the runner replaces it
    # verl's run starts workers; this one records the trainer class the real one would build at that moment.
    monkeypatch.setattr(
        v0.TaskRunner.__ray_metadata__.modified_class,
        "run",
        lambda self, config: built.append((v0.RayPPOTrainer, config)),
    )
    frozen_actor_task_runner().__ray_metadata__.modified_class().run("config")
    assert built == [(FrozenActorTrainer, "config")]


def test_frozen_actor_trainer_never_updates_the_actor() -> None:
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    from cuda_agent.rl.critic_warmup import FrozenActorTrainer

    assert issubclass(FrozenActorTrainer, RayPPOTrainer)
    trainer = object.__new__(FrozenActorTrainer)  # no workers: an update would need self.actor_rollout_wg
    assert trainer._update_actor(batch=None).meta_info == {"metrics": {}}


def test_the_replay_loop_verl_registers_is_one_hydra_can_locate() -> None:
    """verl's AgentLoopWorker instantiates an agent loop from its registry entry with hydra; our class is built inside
    a function, and `register` records module + qualname (`..._verl_classes.<locals>.ReplayAgentLoop`, which hydra
    cannot import: the CPU chain's critic-warmup failed on it, 2026-12-05)."""
    from hydra.utils import get_class
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

    from cuda_agent.rl.critic_warmup import REPLAY_LOOP, ReplayAgentLoop

    assert get_class(_agent_loop_registry[REPLAY_LOOP]["_target_"]) is ReplayAgentLoop


def test_the_runner_swaps_the_trainer_after_rays_pickling_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray ships the runner class to its worker by value (cloudpickle), with a copy of verl's TaskRunner whose `run`
    carries its own copy of main_ppo_v0's globals: patching the module there left that copy building verl's own
    trainer, which updated the actor (CPU chain, 2026-12-05: actor weights moved during the critic warm-up)."""
    ray = pytest.importorskip("ray")
    import verl.trainer.main_ppo_v0 as v0

    from cuda_agent.rl.critic_warmup import FrozenActorTrainer, frozen_actor_task_runner

    built = []
    monkeypatch.setattr(v0, "RayPPOTrainer", v0.RayPPOTrainer)
    monkeypatch.setattr(
        v0.TaskRunner.__ray_metadata__.modified_class,
        "run",
        lambda self, config: built.append((v0.RayPPOTrainer, config)),
    )
    shipped = ray.cloudpickle.loads(ray.cloudpickle.dumps(frozen_actor_task_runner().__ray_metadata__.modified_class))
    shipped().run("config")
    assert built == [(FrozenActorTrainer, "config")]
