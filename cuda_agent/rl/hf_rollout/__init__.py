"""A rollout backend for verl on transformers: `actor_rollout_ref.rollout.name: hf`.

Where vLLM or SGLang is installed, use them (`rollout.name: vllm` / `sglang`): they batch far
better and verl drives them unchanged. This backend is for machines that have neither (our H200
image, a CPU box, CI) and for small models: it generates with the policy's own transformers
model, one replica per trainer rank (tensor parallel 1), beside the FSDP actor on the same GPU.

How it plugs into verl 0.9.1 without changing verl: importing this package registers, through
`cuda_agent.rl.verl_compat.register_rollout` (verl's rollout registry is private),
- the worker-side rollout class under ("hf", "async")
  (`adapter.HFServerAdapter`: receives the actor's weights after every update), and
- the replica in `verl.workers.rollout.replica.RolloutReplicaRegistry` under "hf"
  (`replica.HFReplica`: starts an `HFRolloutServer` Ray actor that serves `generate` to the
  agent loop's `LLMServerClient`, token ids in, token ids and log-probs out).

verl imports it in every process through either of its hooks: the `verl.plugins` entry point
in our pyproject (loaded by `import verl` when cuda-agent is pip-installed) or the config's
external-library hook, `actor_rollout_ref.model.external_lib=cuda_agent.rl.hf_rollout`, which
`cuda_agent.rl.launch` sets whenever the rollout is `hf` (this also works from a source checkout
on PYTHONPATH, where entry points do not exist).

Without verl installed there is nothing to register into, and `engine.py` (no Ray, no verl) still
imports: `bench/hf_decode.py` times its decode on a bare GPU image.
"""

from __future__ import annotations

NAME = "hf"


def _load_replica() -> type:
    from cuda_agent.rl.hf_rollout.replica import HFReplica

    return HFReplica


def register() -> None:
    """Add the `hf` rollout to verl's registries (idempotent; `verl_compat.register_rollout`); nothing without verl."""
    import importlib.util

    if importlib.util.find_spec("verl") is None:
        return
    from cuda_agent.rl.verl_compat import register_rollout

    register_rollout(NAME, "cuda_agent.rl.hf_rollout.adapter.HFServerAdapter", _load_replica)


register()
