"""Every touch of verl's internals, in one place, with the verl versions it was written against.

The rest of `cuda_agent.rl` uses verl through its public surface (configs, `AgentLoopBase`, `register`, the
trainers' entry points). What a verl release may change without notice is here, and each function checks the
installed verl first (`check_version`), so a new verl fails with one line naming this module instead of
training quietly wrong:

| touch | verl 0.9.1 internal | why |
|---|---|---|
| `keep_agent_loop` | `agent_loop._agent_loop_registry` | `register` overwrites the entry verl loaded from the agent-loop YAML (our settings) when hydra first imports the loop's module; keep it |
| `register_rollout` | `workers.rollout.base._ROLLOUT_REGISTRY` | the `hf` rollout (`cuda_agent.rl.hf_rollout`): verl has no public way to add a rollout |
| `replace_logprobs` | `utils.torch_functional.logprobs_from_logits_v2` | per-token log-probs in blocks where flash-attn is missing (`cuda_agent.rl.verl_logprobs`) |
| `replace_process_group_init` | `utils.distributed.initialize_global_process_group` | verl's SFT trainer on the CPU (`cuda_agent.rl.sft_cpu`) |
| `replace_legacy_trainer` | `trainer.main_ppo_v0.RayPPOTrainer` | the critic warm-up's frozen actor (`cuda_agent.rl.critic_warmup`) |
| `agent_loop_classes` | `AgentLoopWorker._compute_score`, `AgentLoopManager._performance_metrics`, `agent_loop_workers_class` | dropping our failures (a data step on each sample, after its reward) and our episode metrics in the step's log |

verl's V1 trainer (`trainer.use_v1=true`, verl 0.9.1's default) is not used: it needs the TransferQueue package,
which `verl==0.9.1` does not install, and its agent-loop manager must write to TransferQueue, so our manager
(metrics, dropped samples) and the critic warm-up's trainer (a subclass of the legacy `RayPPOTrainer`) have no
place in it. Every PPO stage runs the legacy trainer (`cuda_agent.rl.launch`); the rft stage runs verl's SFT
trainer, which has no V1 variant.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from cuda_agent.errors import ConfigError

VERL_VERSIONS = ("0.9.1",)
"""The verl releases every touch below was read against (their sources, line by line)."""


def version_problem() -> str | None:
    """One line when the installed verl is not one of `VERL_VERSIONS`, else None."""
    import verl

    if verl.__version__ in VERL_VERSIONS:
        return None
    return (
        f"verl {verl.__version__} is installed, but cuda_agent's use of verl's internals was written against verl "
        f"{', '.join(VERL_VERSIONS)}: install that (pip install -e '.[rl]'), or check each touch in "
        "cuda_agent/rl/verl_compat.py against the new verl and add its version to VERL_VERSIONS"
    )


def check_version() -> None:
    """Raises ConfigError (`version_problem`'s line) unless the installed verl is one of `VERL_VERSIONS`."""
    problem = version_problem()
    if problem:
        raise ConfigError(problem)


def config_problems(cfg: Any) -> list[str]:
    """What in a composed PPO config our verl adapter cannot run: another verl, or the V1 trainer."""
    problems = [p for p in [version_problem()] if p]
    if cfg.trainer.get("use_v1", False):
        problems.append(
            "trainer.use_v1=true: cuda-agent runs verl's legacy trainer (cuda_agent/rl/verl_compat.py "
            "says why); set trainer.use_v1=false"
        )
    return problems


def keep_agent_loop(name: str, cls: type) -> None:
    """Register `cls` as agent loop `name` unless verl's registry holds it already (with the YAML's settings)."""
    check_version()
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry, register

    if name not in _agent_loop_registry:
        register(name)(cls)


def register_rollout(name: str, adapter: str, load_replica: Callable[[], type]) -> None:
    """Add a rollout backend: its worker-side adapter (dotted path) and its replica class (idempotent)."""
    check_version()
    from verl.workers.rollout.base import _ROLLOUT_REGISTRY
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    _ROLLOUT_REGISTRY[(name, "async")] = adapter
    RolloutReplicaRegistry.register(name, load_replica)


def replace_logprobs(function: Callable) -> None:
    """Put `function` in the place of verl's row-by-row `logprobs_from_logits_v2` (used without flash-attn)."""
    check_version()
    from verl.utils import torch_functional

    torch_functional.logprobs_from_logits_v2 = function


def replace_process_group_init(function: Callable) -> None:
    """Put `function` in the place of `verl.utils.distributed.initialize_global_process_group`.

    verl's SFT trainer imports the function from the module when it runs, so it gets this one.
    """
    check_version()
    import verl.utils.distributed

    verl.utils.distributed.initialize_global_process_group = function


def replace_legacy_trainer(trainer_class: type) -> Any:
    """Make verl's legacy task runner build `trainer_class` instead of `RayPPOTrainer`; returns that module."""
    check_version()
    import verl.trainer.main_ppo_v0 as v0

    v0.RayPPOTrainer = trainer_class
    return v0


@functools.cache
def agent_loop_classes() -> tuple[type, type]:
    """verl's agent-loop worker and manager with our two additions: `(CudaAgentLoopWorker, CudaAgentLoopManager)`.

    - the worker zeroes the response mask of every sample our judge failed on (`metrics.mask_our_failure`), right
      after its reward is computed and before it is padded into the batch: a data step, so whatever reads the
      batch (the trainer, verl's metrics, a rollout dump) sees the sample as dropped;
    - the manager adds the batch's `cuda_agent/*` episode metrics to the rollout's timing dict, the one dict verl
      0.9.1's legacy trainer logs from a rollout (as `timing_s/cuda_agent/...`); it changes nothing in the batch.
    """
    check_version()
    import ray
    from verl.experimental.agent_loop.agent_loop import AgentLoopManager, AgentLoopWorker

    from cuda_agent.rl.metrics import episode_metrics, mask_our_failure

    class CudaAgentLoopWorker(AgentLoopWorker):
        async def _compute_score(self, outputs: list[Any], kwargs: dict) -> None:
            await super()._compute_score(outputs, kwargs)
            mask_our_failure(outputs)

    class CudaAgentLoopManager(AgentLoopManager):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.agent_loop_workers_class = ray.remote(CudaAgentLoopWorker)  # verl's hook: set before its __init__
            super().__init__(*args, **kwargs)

        def _performance_metrics(self, metrics: list[list[dict[str, Any]]], output: Any) -> dict[str, float]:
            timing = super()._performance_metrics(metrics, output)
            timing.update(episode_metrics(output.non_tensor_batch))
            return timing

    return CudaAgentLoopWorker, CudaAgentLoopManager
