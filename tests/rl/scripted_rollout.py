"""A verl rollout that plays a scripted agent: `actor_rollout_ref.rollout.name=scripted`, for CPU wiring tests.

A tiny random policy writes no tool call, so under PPO every episode would be one turn. This rollout
answers each of verl's `generate` calls with the next turn of an `agentic_sft` script instead (read
model.py, write a kernel, build it, ...), as token ids of the policy's own tokenizer and chat format,
so `CudaAgentLoop` runs real multi-turn episodes: real workspace tools, builds and judge. The
log-probs it returns are the current policy's for those tokens (`HFEngine.score` on the weights
the actor synced), so PPO's ratio and verl's rollout-vs-actor check see what sampling would have.

It is the `hf` rollout with another server: the replica (`HFReplica.server_class`), the weight
sync (`HFServerAdapter`) and verl's controls are the product's. verl imports this module in every
process through `actor_rollout_ref.model.external_lib=tests.rl.scripted_rollout` (the repository
root on PYTHONPATH), which registers it in verl's two rollout registries, as `cuda_agent.rl.hf_rollout`
registers `hf`.

Which turn: the task is the curriculum task whose reference the first prompt names, and the turn
is the number of assistant turns already in the prompt, so the reply depends on the prompt alone.
"""

from __future__ import annotations

import asyncio
from typing import Any

from verl.utils.fs import copy_to_local
from verl.workers.rollout.base import _ROLLOUT_REGISTRY
from verl.workers.rollout.replica import RolloutReplicaRegistry, TokenOutput

import cuda_agent.rl.hf_rollout  # noqa: F401  (registers `hf`, whose adapter this rollout uses)
from cuda_agent.rl.agentic_curriculum import TASKS
from cuda_agent.rl.agentic_sft import assistant_text, scripted_turns
from cuda_agent.rl.hf_rollout.engine import request_from_params
from cuda_agent.rl.hf_rollout.replica import HFReplica
from cuda_agent.rl.hf_rollout.server import HFRolloutServer

NAME = "scripted"
SCRIPT = "give_up"
"""The `agentic_sft.SCRIPTS` entry every episode plays: write a kernel that does not build, build it (the
compiler's error comes back), finish. Six turns, and the cheapest script with a real build and judgement."""
DEVICE = "cpu"
"""The kernels the script writes (C++ with OpenMP): the test's episodes and judge run on the CPU."""
ASSISTANT = "<|im_start|>assistant"


class ScriptedRolloutServer(HFRolloutServer):
    """`HFRolloutServer` whose `generate` replies with the script's next turn (see the module docstring)."""

    def __init__(self, config: Any, model_config: Any, *args: Any, **kwargs: Any) -> None:
        from transformers import AutoTokenizer

        super().__init__(config, model_config, *args, **kwargs)
        self.tokenizer = AutoTokenizer.from_pretrained(copy_to_local(str(model_config.path)))

    async def generate(
        self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str, **kwargs: Any
    ) -> TokenOutput:
        text = self.tokenizer.decode(prompt_ids, skip_special_tokens=False)
        named = [task for task in TASKS if task.ref in text]
        if not named or ASSISTANT not in text:
            raise ValueError(f"the prompt names no curriculum task or asks for no reply: {text[-300:]!r}")
        task = max(named, key=lambda t: len(t.ref))
        turns = scripted_turns(task, SCRIPT, DEVICE)
        number = text.count(ASSISTANT) - 1  # the prompt ends with the header of the reply asked for
        if number >= len(turns):
            raise ValueError(f"the {SCRIPT} script of {task.ref} has {len(turns)} turns; turn {number + 1} was asked")
        ids = self.tokenizer.encode(assistant_text(turns[number]), add_special_tokens=False)
        ids.append(self.tokenizer.eos_token_id)
        default = self.prompt_length + self.response_length - len(prompt_ids)
        ids = ids[: request_from_params(prompt_ids, sampling_params, default, self.max_model_len).max_tokens]
        temperature = float(sampling_params.get("temperature") or 0.0)
        temperature = temperature if temperature > 0 else 1.0  # greedy: log-probs at temperature 1, as HFEngine's
        async with self._lock:  # the weights the last sync brought, never half-updated
            logprobs = await asyncio.to_thread(self.engine.score, prompt_ids, ids, temperature)
        return TokenOutput(
            token_ids=ids,
            log_probs=logprobs if sampling_params.get("logprobs") else None,
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )


class ScriptedReplica(HFReplica):
    server_class = ScriptedRolloutServer


_ROLLOUT_REGISTRY[(NAME, "async")] = "cuda_agent.rl.hf_rollout.adapter.HFServerAdapter"
RolloutReplicaRegistry.register(NAME, lambda: ScriptedReplica)
