"""The `hf` rollout inside verl's trainer worker: sends the actor's weights to the rollout server.

verl's `ActorRolloutRefWorker` builds its rollout with `get_rollout_class(name, "async")` and, after
every actor update (`CheckpointEngineManager.update_weights`, backend `naive`), calls
`rollout.update_weights(per_tensor_param, ...)` with the actor's full tensors by Hugging Face name.
This adapter forwards them, in buckets, to its replica's `HFRolloutServer` (a Ray actor found by
name, as verl's vLLM adapter finds its server), then tells the server the sync is complete.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Generator
from typing import Any

import ray
import torch
from verl.workers.rollout.base import BaseRollout

logger = logging.getLogger(__name__)

SERVER_NAME = "hf_server_{replica_rank}"


class HFServerAdapter(BaseRollout):
    """verl's `BaseRollout` for `rollout.name: hf` (one replica per trainer rank: tensor parallel 1)."""

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, model_config, device_mesh)
        world = self.config.tensor_model_parallel_size * self.config.data_parallel_size
        world *= self.config.pipeline_model_parallel_size
        if world != 1:
            raise ValueError(
                f"the hf rollout runs one replica per GPU: set actor_rollout_ref.rollout.tensor_model_parallel_size=1 "
                f"(and data/pipeline parallel 1), not a world of {world}"
            )
        self.replica_rank = int(os.environ.get("RANK", "0"))
        self.bucket_bytes = int(self.config.checkpoint_engine.update_weights_bucket_megabytes) << 20
        self._server: Any = None

    def _server_handle(self) -> Any:
        # Found lazily: verl starts the servers after the trainer workers that hold these adapters.
        if self._server is None:
            self._server = ray.get_actor(SERVER_NAME.format(replica_rank=self.replica_rank))
        return self._server

    async def update_weights(
        self,
        weights: Generator[tuple[str, torch.Tensor], None, None],
        wire_format: str = "named_tensors",
        **kwargs: Any,
    ) -> None:
        """Send the actor's tensors to the server in buckets (on the CPU, through Ray's object store)."""
        if wire_format != "named_tensors":
            raise ValueError(f"the hf rollout takes full tensors (named_tensors), not {wire_format!r}")
        if kwargs.get("peft_config") is not None:
            raise ValueError("the hf rollout takes merged weights: set actor_rollout_ref.model.lora.merge=true")
        server = self._server_handle()
        bucket: list[tuple[str, torch.Tensor]] = []
        size = 0
        for name, tensor in weights:
            cpu = tensor.detach().to("cpu", copy=True)
            bucket.append((name, cpu))
            size += cpu.numel() * cpu.element_size()
            if size >= self.bucket_bytes:
                await server.update_weights.remote(bucket)
                bucket, size = [], 0
        if bucket:
            await server.update_weights.remote(bucket)
        await server.finish_weight_sync.remote(kwargs.get("global_steps"))

    async def resume(self, tags: list[str]) -> None:
        """Nothing to restore: the server keeps its weights and no cache between batches."""
        return None

    async def release(self) -> None:
        return None
