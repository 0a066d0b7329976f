"""The `hf` rollout server: verl's token-in, token-out `generate` on an `HFEngine`, as a Ray actor.

verl's agent loop reaches a rollout through `LLMServerClient.generate`, which calls
`server.generate.remote(prompt_ids=..., sampling_params=..., request_id=...)` on the replica's
server handle and expects a `TokenOutput` (token ids, log-probs, stop reason). This actor answers
that call. A batch starts once a burst of requests has arrived (`_gather`); requests that arrive while it
runs wait and go together into the next one, so concurrent episodes share forward passes. A batch decodes at
most `ROUND_STEPS` tokens: a reply not finished by then goes back to the front of the queue with what it made and
continues in the next batch beside the requests that arrived meanwhile (continuous batching, coarsely), so one long
reply never holds every other episode's next turn, and its tool calls, until it ends. The batch runs in a worker
thread: the actor's event loop keeps taking requests and control calls; each batch prints one line (rows, steps,
finished replies, seconds) to the actor's log.

The actor holds its own copy of the policy on the GPU of the trainer worker it serves (or the
CPU). The worker's `HFServerAdapter.update_weights` pushes the actor's tensors here after each
update (`update_weights`), so every rollout after a sync samples from the new policy.

How a batch decodes is `actor_rollout_ref.rollout.engine_kwargs.hf.decode` (`HFEngine.DECODE`): "eager" (the
default), "static" or "graphs" (a static KV cache, its decode step replayed as CUDA graphs: `static_decode.py`).
From the command line: `+actor_rollout_ref.rollout.engine_kwargs.hf.decode=graphs`.

verl's sleep and wake-up exist to free a vLLM engine's memory for training, and verl calls them around every
step: this server keeps its static cache and graphs through them (capturing again each step would cost seconds),
and frees them on `release_kv_cache`. The eager decode keeps no cache between batches.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from cuda_agent.rl.hf_rollout.engine import GenRequest, GenResult, HFEngine, request_from_params

logger = logging.getLogger(__name__)


@dataclass
class _Job:
    """One `generate` call: the request as asked, its caller's future, and the reply made so far."""

    request: GenRequest
    future: asyncio.Future
    made: GenResult = field(default_factory=GenResult)

    def next_request(self) -> GenRequest:
        """The request that continues the reply from where the last batch left it."""
        return replace(
            self.request,
            prompt_ids=self.request.prompt_ids + self.made.token_ids,
            max_tokens=self.request.max_tokens - len(self.made.token_ids),
        )

    def add(self, result: GenResult) -> bool:
        """Append a batch's ids; True once the reply is finished (a stop token or its max_tokens)."""
        self.made.token_ids += result.token_ids
        self.made.log_probs += result.log_probs
        self.made.stopped = result.stopped
        return result.stopped or len(self.made.token_ids) >= self.request.max_tokens


class HFRolloutServer:
    """Serves `generate` for one rollout replica (one trainer rank).

    Args:
        config: verl's rollout config (`RolloutConfig` or its DictConfig): dtype, seed, lengths, load_format.
        model_config: verl's `actor_rollout_ref.model` config: path, override_config.
        device: "cuda" or "cpu".
        cuda_visible_devices: the trainer worker's GPU, set before CUDA starts (Ray does not set it here).
        replica_rank: this replica's rank (seeds differ per replica).
    """

    GATHER_QUIET_S = 0.05  # a batch starts once no request came for this long (see `_gather`) ...
    GATHER_MAX_S = 0.5  # ... or after this long at most: small next to a batch's seconds of decoding
    ROUND_STEPS = 64
    """Tokens a batch decodes at most before unfinished replies rejoin the queue (module doc). A finished reply waits
    for its batch's longest: a Bash call's 30 tokens beside a kernel's 400 would wait 400 steps (~10 s at ~25 ms a
    step on an H100) without a bound; going on costs the rows that continue a new prefill (estimated ~0.3 s for 16
    rows of 5k tokens of a 135M model there, not measured) against 1.2-2.1 s measured for 64 decoding steps."""

    def __init__(
        self,
        config: Any,
        model_config: Any,
        device: str,
        cuda_visible_devices: str | None = None,
        replica_rank: int = 0,
    ) -> None:
        if cuda_visible_devices is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = cuda_visible_devices
        override = dict(getattr(model_config, "override_config", None) or {})
        self.prompt_length = int(config.prompt_length)
        self.response_length = int(config.response_length)
        self.max_model_len = int(config.max_model_len or self.prompt_length + self.response_length)
        self.max_batch = int(config.max_num_seqs)
        options = dict((getattr(config, "engine_kwargs", None) or {}).get("hf") or {})
        unknown = set(options) - {"decode"}
        if unknown:
            raise ValueError(f"engine_kwargs.hf takes only 'decode', not {sorted(unknown)}")
        self.engine = HFEngine.from_pretrained(
            _local_path(str(model_config.path)),
            device=device,
            dtype=str(config.dtype),
            random_weights=str(config.load_format) == "dummy",
            attn_implementation=override.get("attn_implementation", "sdpa"),
            seed=int(config.seed) + replica_rank,
            decode=str(options.get("decode", "eager")),
        )
        self.seed = int(config.seed) + replica_rank
        self.global_steps: int | None = None
        self.weight_syncs = 0
        self._pending: list[_Job] = []
        self._runner: asyncio.Task | None = None
        self._lock = asyncio.Lock()  # a weight update never overlaps a batch

    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str,
        image_data: Any = None,
        video_data: Any = None,
        **kwargs: Any,
    ) -> Any:
        """verl's server `generate`: one reply to `prompt_ids`, as a `TokenOutput`."""
        from verl.workers.rollout.replica import TokenOutput

        if image_data is not None or video_data is not None:
            raise ValueError("the hf rollout serves text models only; use vllm or sglang for images and video")
        default = min(self.response_length, self.prompt_length + self.response_length - len(prompt_ids))
        request = request_from_params(prompt_ids, sampling_params, default, self.max_model_len)
        future = asyncio.get_running_loop().create_future()
        self._pending.append(_Job(request, future))
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._run_batches())
        result = await future
        return TokenOutput(
            token_ids=result.token_ids,
            log_probs=result.log_probs if sampling_params.get("logprobs") else None,
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )

    async def _gather(self) -> None:
        """Let a burst of requests arrive before a batch starts: until none came for `GATHER_QUIET_S`, the batch
        is full, or `GATHER_MAX_S` passed. verl's agent-loop workers send a step's requests over Ray a few
        milliseconds apart; taken as they came, the first one ran alone and the other 15 waited for it, which
        doubled a step's generation (H100, 2026-12-05: 3.0 s for one answer, 6.0 s for the rest; a decoding step
        of the tiny model costs the same for 1 row as for 16)."""
        loop = asyncio.get_running_loop()
        deadline, seen = loop.time() + self.GATHER_MAX_S, -1
        while len(self._pending) != seen and len(self._pending) < self.max_batch and loop.time() < deadline:
            seen = len(self._pending)
            await asyncio.sleep(self.GATHER_QUIET_S)

    async def _run_batches(self) -> None:
        while self._pending:
            await self._gather()
            batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
            started = time.perf_counter()
            async with self._lock:
                try:
                    results = await asyncio.to_thread(
                        self.engine.generate, [job.next_request() for job in batch], self.ROUND_STEPS
                    )
                except Exception as exc:  # every waiting request gets the batch's error
                    for job in batch:
                        if not job.future.done():
                            job.future.set_exception(exc)
                    continue
            unfinished = []
            for job, result in zip(batch, results, strict=True):
                if not job.add(result):
                    unfinished.append(job)
                elif not job.future.done():
                    job.future.set_result(job.made)
            self._pending = unfinished + self._pending  # continued replies go first: they were asked earlier
            print(
                f"hf rollout: batch of {len(batch)}, {max(len(r.token_ids) for r in results)} steps, "
                f"{len(batch) - len(unfinished)} replies finished, {len(unfinished)} continue, "
                f"{len(self._pending)} waiting, {time.perf_counter() - started:.1f} s",
                file=sys.stderr,
                flush=True,
            )

    async def update_weights(self, named_tensors: list[tuple[str, torch.Tensor]]) -> int:
        """Load one bucket of the actor's tensors (by Hugging Face name); returns how many."""
        async with self._lock:
            return await asyncio.to_thread(self.engine.load_weights, named_tensors)

    async def finish_weight_sync(self, global_steps: int | None) -> None:
        """The last bucket arrived: later replies carry `global_steps` (verl's staleness metrics).

        Sampling is re-seeded from (seed, step): a run resumed from the checkpoint of step N samples
        step N+1 from the same random stream as the run it continues (up to how requests batch).
        """
        self.global_steps = global_steps
        self.weight_syncs += 1
        self.engine.generator.manual_seed(self.seed + 1_000_003 * (global_steps or 0))

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    async def score(self, prompt_ids: list[int], response_ids: list[int], temperature: float = 1.0) -> dict[str, Any]:
        """Log-probs of a fixed continuation under the current weights, and the step they came from.

        A probe for weight sync (bench/train_gpu.sh): the same tokens score differently after every update.
        """
        async with self._lock:
            logprobs = await asyncio.to_thread(self.engine.score, prompt_ids, response_ids, temperature)
        return {"log_probs": logprobs, "global_steps": self.global_steps, "weight_syncs": self.weight_syncs}

    def stats(self) -> dict[str, Any]:
        """Device, weight syncs so far and the step of the current weights (for checks)."""
        return {
            "device": str(self.engine.device),
            "weight_syncs": self.weight_syncs,
            "global_steps": self.global_steps,
        }

    # verl's memory and scheduling controls: nothing to free or abort between batches.
    async def wake_up(self, tags: list[str] | None = None) -> None:
        return None

    async def sleep(self) -> None:
        return None

    async def clear_kv_cache(self) -> None:
        return None

    async def release_kv_cache(self) -> None:
        async with self._lock:
            self.engine.release()

    async def resume_kv_cache(self) -> None:
        return None

    async def abort_all_requests(self, reject_request: bool = False) -> dict[str, Any]:
        return {"aborted_count": 0, "request_ids": []}

    async def resume_generation(self) -> None:
        return None

    async def start_profile(self, **kwargs: Any) -> None:
        return None

    async def stop_profile(self) -> None:
        return None


def _local_path(path: str) -> str:
    from verl.utils.fs import copy_to_local

    return copy_to_local(path)
