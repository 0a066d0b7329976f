"""The `cuda_agent` agent loop for verl: our episode runner behind verl's `AgentLoopBase` interface.

verl's trainer asks each registered agent loop for `run(sampling_params, **row) -> AgentLoopOutput`
per dataset row. This class only adapts: it builds a `VerlTokenModel` on verl's server manager
and Continuous Token builder, runs our synchronous `run_rollout` in a worker thread (the model
hands generation back to this event loop), and packs the token record and the judge's reward.

It is imported by verl (through the registry, `_target_: cuda_agent.rl.agent_loop.CudaAgentLoop`, and as the
agent-loop manager class `cuda_agent.rl.agent_loop.CudaAgentLoopManager`, built in `verl_compat` with the rest
of what touches verl's internals), never by the rest of cuda_agent.
Enable it with an agent-loop YAML (verl's `actor_rollout_ref.rollout.agent.agent_loop_config_path`):

    - name: cuda_agent
      _target_: cuda_agent.rl.agent_loop.CudaAgentLoop
      sandbox_url: http://judge-host:8000   # `cuda-agent serve`; omit to judge locally
      work_dir: /shared/rollouts            # seen by the service at the same path
      device: cuda

and `agent_name: cuda_agent` in the dataset rows (or `rollout.agent.default_agent_loop: cuda_agent`).
Each row names its task with a `task` reference or `code` source (top level or in `extra_info`).
The prompt is our own (SKILL.md and the task), built from the workspace; the row's `raw_prompt`
is not used.
"""

from __future__ import annotations

import asyncio
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, DictConfigWrap

from cuda_agent.errors import ConfigError
from cuda_agent.rl.config import CudaAgentLoopConfig
from cuda_agent.rl.metrics import is_our_failure
from cuda_agent.rl.rft import TokenRecord
from cuda_agent.rl.rollout import (
    dropped_extra_info,
    episode_fields,
    reward_extra_info,
    run_rollout,
    task_from_row,
    token_record,
)
from cuda_agent.rl.verl_compat import agent_loop_classes, keep_agent_loop
from cuda_agent.rl.verl_model import VerlTokenModel
from cuda_agent.types import EpisodeEnd

OUT_OF_ROOM = (EpisodeEnd.CONTEXT_LENGTH, EpisodeEnd.TOKEN_BUDGET)
"""Episode ends that mean the episode was cut by its length (counted as clipped)."""


class CudaAgentLoop(AgentLoopBase):
    """One CUDA-kernel episode per dataset row, rewarded by the judge.

    Args:
        *args, **kwargs: what verl passes every agent loop (trainer config, server manager, tokenizer, ...).
        name: the registry name from the agent-loop YAML (ignored).
        tools: verl's tool list (ignored: our tools are the workspace's Bash, Read, Write, ...).
        **settings: `CudaAgentLoopConfig` fields from the agent-loop YAML.
    """

    def __init__(self, *args: Any, name: str | None = None, tools: Any = None, **kwargs: Any) -> None:
        fields = CudaAgentLoopConfig.model_fields
        settings = {key: kwargs.pop(key) for key in list(kwargs) if key in fields}
        super().__init__(*args, **kwargs)
        multi_turn = self.rollout_config.get("multi_turn", {}) or {}
        if multi_turn.get("max_assistant_turns") and "max_turns" not in settings:
            settings["max_turns"] = int(multi_turn["max_assistant_turns"])
        self.settings = CudaAgentLoopConfig(**settings)
        self.prompt_length = int(self.rollout_config.prompt_length)
        self.response_length = int(self.rollout_config.response_length)
        # verl's servers take the model's positions when this is unset; `cuda_agent.rl.launch` sets it, so the
        # episode and the server agree on where the context ends.
        max_model_len = self.rollout_config.get("max_model_len")
        self.max_model_len = int(max_model_len) if max_model_len else None

    @classmethod
    def standalone(
        cls,
        server: Any,
        tokenizer: Any,
        prompt_length: int,
        response_length: int,
        hf_model_type: str | None = None,
        max_model_len: int | None = None,
        **settings: Any,
    ) -> CudaAgentLoop:
        """The agent loop outside verl's trainer: on `server` (anything with verl's `generate`), for scripted
        episodes (agentic_sft.py) and tests. `hf_model_type` is the model's config.json model_type, which picks
        verl's token builder as the trainer would; `max_model_len` is the server's context (rollout.max_model_len);
        `settings` are `CudaAgentLoopConfig` fields."""
        rollout = {
            "prompt_length": prompt_length,
            "response_length": response_length,
            "max_model_len": max_model_len,
            "multi_turn": {},
        }
        return cls(
            trainer_config=DictConfigWrap(OmegaConf.create({"actor_rollout_ref": {"rollout": rollout}})),
            server_manager=server,
            tokenizer=tokenizer,
            processor=None,
            dataset_cls=None,
            data_config=DictConfigWrap(OmegaConf.create({})),
            hf_model_type=hf_model_type,
            **settings,
        )

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """Run one episode for the dataset row `kwargs`; the judge's reward lands on the last model token."""
        loop = asyncio.get_running_loop()
        request_id = uuid.uuid4().hex
        if self.settings.max_turn_tokens is not None:
            asked = sampling_params.get("max_tokens")
            cap = self.settings.max_turn_tokens
            sampling_params = sampling_params | {"max_tokens": min(int(asked), cap) if asked else cap}
        model = VerlTokenModel(
            self.server_manager,
            self.continuous_token_builder,
            loop,
            sampling_params,
            self.response_length,
            request_id=request_id,
            max_model_len=self.max_model_len,
        )
        task = task_from_row(kwargs)
        episode_dir = self.settings.work_dir / f"{task.ref.replace('/', '_')}-{request_id[:12]}"
        # A thread of its own per episode: builds and judging block for seconds to minutes, and verl's
        # default executor is shared with its tokenisation work.
        try:
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="cuda-agent-episode") as pool:
                result = await loop.run_in_executor(
                    pool,
                    run_rollout,
                    model,
                    task,
                    self.settings,
                    episode_dir,
                    min(self.prompt_length + self.response_length, self.max_model_len or 1 << 62),
                )
        except Exception as exc:
            if not is_our_failure(exc):
                raise
            return self._dropped(model, str(exc))
        if not model.prompt_ids:  # the first prompt alone overflowed the budget: no token to train on
            raise ConfigError(
                f"{task.ref}: the episode's first prompt does not fit in rollout prompt_length + response_length "
                f"({self.prompt_length} + {self.response_length}) and the model never ran; raise data.max_prompt_length"
            )
        # Clipped: the response filled its budget (a last reply cut at max_tokens reads as a finish), or the next turn
        # had no room left: verl's over-long episodes.
        capped = len(model.response_ids) >= self.response_length or result.exit_status in OUT_OF_ROOM
        response_ids, response_mask, logprobs = token_record(
            model.response_ids, model.response_mask, model.response_logprobs, self.response_length
        )
        fields = episode_fields(result, response_ids, capped)
        if self.settings.save_tokens:  # the collect stage: RFT trains on the exact tokens, the critic replays them
            TokenRecord(
                prompt_ids=model.prompt_ids,
                response_ids=response_ids,
                response_mask=response_mask,
                reward=fields["reward"],
            ).write(result.trajectory.parent)
        return AgentLoopOutput(
            prompt_ids=model.prompt_ids,
            response_ids=response_ids,
            response_mask=response_mask,
            response_logprobs=logprobs,
            reward_score=fields["reward"],
            num_turns=result.turns + fields["tool_rounds"] + 1,
            metrics=AgentLoopMetrics(
                generate_sequences=fields["model_s"], tool_calls=fields["tools_s"], compute_score=fields["judge_s"]
            ),
            # verl turns reward_extra_info into validation metrics per data source (cuda_agent.rl.metrics).
            extra_fields={**fields, "reward_extra_info": reward_extra_info(result, fields)},
        )

    def _dropped(self, model: VerlTokenModel, reason: str) -> AgentLoopOutput:
        # Our failure: masked out (all-zero response mask, no reward) and counted, never trained on.
        response_ids = model.response_ids[: self.response_length] or [self.tokenizer.eos_token_id]
        # Failed before the first prompt was rendered: one placeholder token, masked out like the response.
        prompt_ids = model.prompt_ids or [self.tokenizer.eos_token_id]
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            response_mask=[0] * len(response_ids),
            reward_score=0.0,
            num_turns=1,
            metrics=AgentLoopMetrics(),
            extra_fields={"reward_extra_info": dropped_extra_info(reason)},
        )


CudaAgentLoopWorker, CudaAgentLoopManager = agent_loop_classes()
"""verl's agent-loop worker and manager plus our dropped samples and episode metrics (`verl_compat`). Enable with
`+actor_rollout_ref.rollout.agent.agent_loop_manager_class=cuda_agent.rl.agent_loop.CudaAgentLoopManager` (the
bundled recipes do); it serves verl's legacy trainer (`trainer.use_v1=false`)."""

keep_agent_loop("cuda_agent", CudaAgentLoop)
