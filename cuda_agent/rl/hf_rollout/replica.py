"""The `hf` rollout replica: starts one `HFRolloutServer` beside each trainer worker.

verl's `LLMServerManager` builds one `RolloutReplica` per rollout world (here one trainer rank) and,
in hybrid mode (rollout and FSDP actor share the GPUs), calls `init_hybrid(worker_group)`, which
calls `launch_servers`. This replica asks its worker where it runs (node, GPU) and starts the
server actor on that node with that GPU visible, named so the worker's `HFServerAdapter` finds it.
The replica's `server_handle` is what verl's load balancer hands to the agent loop's client.
"""

from __future__ import annotations

from typing import Any

import ray
from verl.plugin.platform import get_platform
from verl.workers.rollout.replica import RolloutMode, RolloutReplica

from cuda_agent.rl.hf_rollout.adapter import SERVER_NAME
from cuda_agent.rl.hf_rollout.server import HFRolloutServer


def _where(worker: Any) -> tuple[str, str | None, str]:
    """(node id, GPU id or None, device) of the process this runs in (called inside a trainer worker)."""
    import torch

    context = ray.get_runtime_context()
    gpus = context.get_accelerator_ids().get("GPU") or []
    cuda = torch.cuda.is_available()
    return context.get_node_id(), (str(gpus[0]) if gpus and cuda else None), ("cuda" if cuda else "cpu")


class HFReplica(RolloutReplica):
    """A rollout replica whose server generates with transformers (see `cuda_agent.rl.hf_rollout`)."""

    server_class: type = HFRolloutServer
    """The Ray actor class started as the server; a subclass serves `generate` another way (a scripted policy in the
    CPU wiring test of agentic PPO, tests/rl/scripted_rollout.py) and keeps weight sync and verl's controls."""

    async def launch_servers(self) -> None:
        if self.rollout_mode != RolloutMode.HYBRID:
            raise ValueError(
                "the hf rollout runs beside the trainer (hybrid engine); set actor_rollout_ref.hybrid_engine=true"
            )
        if len(self.workers) != 1:
            raise ValueError(f"the hf rollout serves one trainer rank per replica, got {len(self.workers)} workers")
        node_id, gpu, device = await self.workers[0].__ray_call__.remote(_where)
        env = {var: "1" for var in get_platform().ray_noset_envvars()}  # keep the GPU id we set
        server = (
            ray.remote(self.server_class)
            .options(
                name=SERVER_NAME.format(replica_rank=self.replica_rank),
                num_cpus=0,
                scheduling_strategy=ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
                    node_id=node_id, soft=False
                ),
                runtime_env={"env_vars": env},
                max_concurrency=self.max_concurrency,
            )
            .remote(
                config=self.config,
                model_config=self.model_config,
                device=device,
                cuda_visible_devices=gpu,
                replica_rank=self.replica_rank,
            )
        )
        await server.stats.remote()  # raises here if the model failed to load
        self.servers = [server]
        self._server_handle = server
        self._server_address = f"hf-rollout-{self.replica_rank}@{node_id[:12]}"
