"""What fails only at scale, found before a launch: the context, the GPU split, the judge's capacity, the disk.

`cuda-agent train STAGE --dry-run` (through `recipes.check_plan`) adds these to its problems, one line each:

- the context: verl's vLLM and SGLang servers take `rollout.max_model_len`, or the model's
  `max_position_embeddings` when it is unset (`verl/workers/rollout/vllm_rollout/vllm_async_server.py`), and
  refuse a call past it; our `hf` rollout does the same (`hf_rollout/server.py`). A recipe whose
  `data.max_prompt_length + data.max_response_length` is over that context would have its long episodes
  refused mid-way. Rope scaling (e.g. Qwen3's YaRN) raises the positions; it belongs in the model folder's
  config.json (verl's `override_config` cannot add a `rope_scaling` dict the config lacks);
- the GPU split: a rollout replica (tensor x data x pipeline parallel) and Ulysses sequence parallelism must
  divide the training GPUs, the model's attention heads must split over both, each mini-batch over the
  data-parallel ranks, and training plus judge GPUs must fit the node (`ClusterSettings`);
- the judge: the service's measured judgements per hour (`GET /stats`) against what a step asks for
  (episodes x checks per episode within `judging_s_per_step`); `judge_gpus_needed` answers how many GPUs;
- what a long run needs: checkpoint retention (an 8B actor and critic with Adam state are ~200 GB a save),
  the rollout's log-probabilities (verl's `training/rollout_probs_diff_*` mismatch metric needs them), and a
  cap on `collect` (`data.val_max_samples`: Ops-6K x 4 samples is 24,000 agentic episodes).

`resolved_max_model_len` is the context `cuda_agent.rl.launch` writes into `rollout.max_model_len` when the
recipe leaves it unset, so verl's server and our episodes (`CudaAgentLoop`) stop at the same token.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from cuda_agent.rl.config import ClusterSettings

CAPACITY_MARGIN = 0.5
"""A judge that can answer less than this share of a step's judgements in the step's time is far too slow."""
SAVING_STAGES = ("single-turn", "critic-warmup", "agentic-ppo")
"""PPO stages that checkpoint actor and critic: they must bound how many saves they keep."""


def model_configs(cfg: Any, fallback: Path | None = None) -> tuple[dict, dict] | None:
    """The actor's config.json as shipped and as verl's workers see it (`override_config` applied on top).

    Read from `hf_config_path` (else `path`): a local folder, or the Hugging Face cache for a hub id; else from
    `fallback` (the recipe's `model_config`: a later stage's model folder does not exist before its stage runs).
    None when neither is on this machine (check_plan reports the missing model).
    """
    from omegaconf import OmegaConf

    model = cfg.actor_rollout_ref.model
    path = _config_file(str(model.get("hf_config_path") or model.get("path")))
    if path is None and fallback is not None and Path(fallback).is_file():
        path = Path(fallback)
    if path is None:
        return None
    native = json.loads(path.read_text())
    override = model.get("override_config") or {}
    override = OmegaConf.to_container(override, resolve=True) if OmegaConf.is_config(override) else dict(override)
    override = override.get("model_config", override)  # verl reads Megatron's overrides from there
    return native, {**native, **override}


def _config_file(source: str) -> Path | None:
    local = Path(source).expanduser() / "config.json"
    if local.is_file():
        return local
    if source.startswith(("/", ".", "~")) or source.count("/") != 1:  # a path that is not here, not a hub id
        return None
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(source, "config.json")
    return Path(cached) if isinstance(cached, str) else None


def positions(config: dict) -> int | None:
    """`max_position_embeddings` as verl reads it (top level, else the text model's)."""
    value = config.get("max_position_embeddings") or (config.get("text_config") or {}).get("max_position_embeddings")
    return int(value) if value else None


def resolved_max_model_len(cfg: Any, fallback: Path | None = None) -> int | None:
    """The rollout's context: `rollout.max_model_len`, else prompt + response capped at the model's positions.

    None when neither is known here (the model is not on this machine).
    """
    rollout = cfg.actor_rollout_ref.rollout
    if rollout.get("max_model_len"):
        return int(rollout.max_model_len)
    configs = model_configs(cfg, fallback)
    limit = positions(configs[1]) if configs else None
    if not limit:
        return None
    prompt, response = cfg.data.get("max_prompt_length"), cfg.data.get("max_response_length")
    return min(int(prompt) + int(response), limit) if prompt and response else limit


def context_problems(cfg: Any, configs: tuple[dict, dict]) -> list[str]:
    """prompt + response over the rollout's context, a max_model_len the server refuses, positions without scaling."""
    native, effective = configs
    rollout = cfg.actor_rollout_ref.rollout
    limit, shipped = positions(effective), positions(native)
    if limit is None:
        return ["the model's config.json has no max_position_embeddings: set actor_rollout_ref.rollout.max_model_len"]
    problems = []
    if shipped and limit > shipped and not effective.get("rope_scaling"):
        problems.append(
            f"override_config raises max_position_embeddings from {shipped} to {limit} without rope_scaling: "
            "the model was not trained past its positions; add rope scaling (YaRN) to the model's config.json"
        )
    context = int(rollout.get("max_model_len") or limit)
    need = int(cfg.data.max_prompt_length) + int(cfg.data.max_response_length)
    if context > limit:
        # verl's vLLM and SGLang servers refuse it; ours (hf) would run the model past the positions it knows.
        fails = "our hf rollout would run the model past them" if rollout.name == "hf" else "verl's server refuses it"
        problems.append(
            f"actor_rollout_ref.rollout.max_model_len={context} is over the model's max_position_embeddings={limit}: "
            f"{fails}; lower it, or raise the positions with rope scaling"
        )
    elif need > context:
        problems.append(
            f"data.max_prompt_length + data.max_response_length = {need} tokens is over the {rollout.name} rollout's "
            f"context of {context} tokens: long episodes would be refused mid-way; set data.max_response_length="
            f"{context - int(cfg.data.max_prompt_length)} or raise the context (rope scaling, rollout.max_model_len)"
        )
    return problems


def split_problems(cfg: Any, effective: dict | None, cluster: ClusterSettings | None, critic: bool) -> list[str]:
    """GPUs that parallelism cannot use, batches that do not split over the ranks, a node too small for both."""
    trainer, actor, rollout = cfg.trainer, cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout
    gpus, world = int(trainer.n_gpus_per_node), int(trainer.n_gpus_per_node) * int(trainer.get("nnodes", 1) or 1)
    replica = int(rollout.tensor_model_parallel_size) * int(rollout.get("data_parallel_size", 1) or 1)
    replica *= int(rollout.get("pipeline_model_parallel_size", 1) or 1)
    heads = int((effective or {}).get("num_attention_heads") or 0)
    problems = []
    if world % replica:
        problems.append(
            f"a {rollout.name} replica takes {replica} GPUs (tensor x data x pipeline parallel), which do "
            f"not divide the {world} training GPUs"
        )
    if heads and heads % int(rollout.tensor_model_parallel_size):
        problems.append(
            f"rollout.tensor_model_parallel_size={rollout.tensor_model_parallel_size} does not divide "
            f"the model's {heads} attention heads"
        )
    ulysses = {"actor_rollout_ref.actor": int(actor.get("ulysses_sequence_parallel_size", 1) or 1)}
    if critic:
        ulysses["critic"] = int(cfg.critic.get("ulysses_sequence_parallel_size", 1) or 1)
    for role, size in ulysses.items():
        if world % size:
            problems.append(f"{role}.ulysses_sequence_parallel_size={size} does not divide the {world} training GPUs")
        elif heads and heads % size:
            problems.append(
                f"{role}.ulysses_sequence_parallel_size={size} does not divide the model's {heads} "
                "attention heads (Ulysses splits them)"
            )
    sp = ulysses["actor_rollout_ref.actor"]
    if not trainer.get("val_only") and world % sp == 0:
        mini, n = int(actor.ppo_mini_batch_size), int(rollout.get("n", 1) or 1)
        if (mini * n) % (world // sp):
            problems.append(
                f"actor.ppo_mini_batch_size x rollout.n = {mini * n} samples do not split over the "
                f"{world // sp} data-parallel ranks ({world} GPUs / Ulysses {sp})"
            )
        if int(cfg.data.train_batch_size) % mini:
            problems.append(
                f"data.train_batch_size={cfg.data.train_batch_size} is not a multiple of "
                f"actor.ppo_mini_batch_size={mini}: each step's last mini-batch would be short"
            )
    if cluster is not None and gpus + cluster.judge_gpus > cluster.gpus_per_node:
        problems.append(
            f"trainer.n_gpus_per_node={gpus} + cluster.judge_gpus={cluster.judge_gpus} is over the "
            f"node's {cluster.gpus_per_node} GPUs"
        )
    return problems


def long_run_problems(cfg: Any, stage: str, agentic: bool) -> list[str]:
    """Unbounded checkpoints, no rollout log-probabilities (no mismatch metric), an uncapped collect."""
    problems = []
    trainer = cfg.trainer
    if stage in SAVING_STAGES:
        unbounded = [k for k in ("max_actor_ckpt_to_keep", "max_critic_ckpt_to_keep") if not trainer.get(k)]
        if unbounded:
            problems.append(
                f"trainer.{' and trainer.'.join(unbounded)} unset: every save is kept (an 8B actor and "
                "critic with Adam state are ~200 GB a save); keep the last few"
            )
    if agentic and not cfg.actor_rollout_ref.rollout.get("calculate_log_probs"):
        problems.append(
            "actor_rollout_ref.rollout.calculate_log_probs is false: verl cannot log the rollout-vs-actor "
            "log-prob mismatch (training/rollout_probs_diff_*)"
        )
    if stage == "collect" and int(cfg.data.get("val_max_samples", -1) or -1) <= 0:
        problems.append(
            "data.val_max_samples is unset: collect would roll out every task of data.val_files "
            f"x {cfg.actor_rollout_ref.rollout.val_kwargs.n} samples; cap it"
        )
    return problems


def step_episodes(cfg: Any) -> int:
    """Episodes one step rolls out: the train batch x rollout.n, or collect's validation batch x its samples."""
    rollout = cfg.actor_rollout_ref.rollout
    if cfg.trainer.get("val_only"):
        return int(cfg.data.get("val_batch_size") or 1) * int(rollout.val_kwargs.get("n", 1) or 1)
    return int(cfg.data.train_batch_size) * int(rollout.get("n", 1) or 1)


def judge_gpus_needed(episodes: int, checks: float, seconds: float, per_gpu_per_hour: float) -> int:
    """Judge GPUs that answer `episodes` x `checks` judgements within `seconds`, at a measured rate per GPU.

    Example:
        >>> judge_gpus_needed(1024, 8, 3600, 600.0)   # 8,192 judgements an hour at 600 a GPU-hour
        14
    """
    return max(1, math.ceil(episodes * checks / (per_gpu_per_hour * seconds / 3600)))


def capacity_problems(cfg: Any, cluster: ClusterSettings, stats: dict[str, Any], url: str) -> list[str]:
    """The judge (its measured `GET /stats`) answering far fewer judgements in a step's time than the step asks."""
    rate, per_gpu = stats.get("judgements_per_hour"), stats.get("judgements_per_hour_per_gpu")
    if not rate or not per_gpu:
        return []  # nothing measured yet: `cuda-agent plan` after a warm-up run says more
    episodes = step_episodes(cfg)
    asked = episodes * cluster.checks_per_episode
    answered = rate * cluster.judging_s_per_step / 3600
    if answered >= CAPACITY_MARGIN * asked:
        return []
    needed = judge_gpus_needed(episodes, cluster.checks_per_episode, cluster.judging_s_per_step, per_gpu)
    return [
        f"the judge at {url} answers {rate:.0f} judgements an hour (measured, {per_gpu:.0f} a GPU): {answered:.0f} in "
        f"a step's {cluster.judging_s_per_step:.0f} s, far below the {asked:.0f} that {episodes} episodes x "
        f"{cluster.checks_per_episode:g} checks ask for; give it {needed} GPUs or shrink the batch"
    ]


def fetch_stats(url: str, token: str | None = None) -> dict[str, Any] | None:
    """The service's `GET /stats`, or None when it does not answer (check_plan reports an unreachable service)."""
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.get(f"{url.rstrip('/')}/stats", headers=headers, timeout=5.0)
        response.raise_for_status()
        return response.json()
    except (httpx.HTTPError, ValueError):
        return None
