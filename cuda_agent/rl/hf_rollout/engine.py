"""Token-in, token-out generation with a transformers causal LM: the computation behind the `hf` rollout.

`HFEngine` keeps one model (the rollout's copy of the policy), generates a batch of requests
together (left-padded, one KV cache) and returns, per request, the sampled token ids and the
log-probability of each under the distribution it was sampled from: `log_softmax(logits / T)`,
before top-k/top-p (vLLM's `processed_logprobs`, verl's default). That is what verl's actor
recomputes (`logits / temperature`), so the two agree up to numerics: PPO's ratio starts at 1.

`load_weights` takes the actor's tensors by Hugging Face name (what verl's engines yield to a
rollout in `update_weights`), so after a sync the rollout samples from the updated policy. It copies into the
model's own parameter storage, never replacing a tensor: the static decode's CUDA graphs read the weights there.

A batch decodes eagerly (transformers' DynamicCache) or, with `decode="static"`/`"graphs"`, on a static KV cache
whose one-token step is captured once per shape as a CUDA graph (`static_decode.py`): same tokens, same log-probs.

No Ray and no verl here: `server.py` puts this behind verl's server interface.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from cuda_agent.rl.hf_rollout.static_decode import StaticDecoder


@dataclass(frozen=True)
class GenRequest:
    """One generation request (verl's `generate(prompt_ids, sampling_params)` in our types)."""

    prompt_ids: list[int]
    """The whole context so far, as token ids."""
    max_tokens: int
    """Most new tokens; at least 1."""
    temperature: float = 1.0
    """Sampling temperature; 0 or less is greedy (log-probs then at temperature 1)."""
    top_p: float = 1.0
    """Nucleus sampling mass; 1 keeps every token."""
    top_k: int = -1
    """Keep the k most likely tokens; 0 or less keeps all (vLLM's -1)."""


@dataclass
class GenResult:
    """What one request produced."""

    token_ids: list[int] = field(default_factory=list)
    """Sampled ids, the stop token included when one ended the reply."""
    log_probs: list[float] = field(default_factory=list)
    """log p(token) under the sampling distribution (temperature applied, before top-k/top-p)."""
    stopped: bool = False
    """True when a stop token ended the reply, False when max_tokens did."""


def request_from_params(
    prompt_ids: Sequence[int], params: dict[str, Any], default_max_tokens: int, max_model_len: int
) -> GenRequest:
    """A `GenRequest` from verl's sampling parameters (vLLM names), budgeted the way verl's vLLM server does.

    Raises:
        ValueError: the prompt leaves no room, or a parameter this backend does not implement is set.
    """
    room = max_model_len - len(prompt_ids)
    if room < 1:
        raise ValueError(f"prompt of {len(prompt_ids)} tokens leaves no room within max_model_len={max_model_len}")
    penalty = float(params.get("repetition_penalty", 1.0) or 1.0)
    if penalty != 1.0:
        raise ValueError(f"the hf rollout does not implement repetition_penalty={penalty}; leave it at 1.0")
    limit = params.get("max_tokens", params.get("max_new_tokens"))
    max_tokens = max(1, min(int(limit) if limit is not None else default_max_tokens, room))
    top_k = params.get("top_k")
    return GenRequest(
        prompt_ids=[int(t) for t in prompt_ids],
        max_tokens=max_tokens,
        temperature=float(params.get("temperature", 1.0)),
        top_p=float(params.get("top_p", 1.0) if params.get("top_p") is not None else 1.0),
        top_k=int(top_k) if top_k is not None else -1,
    )


class HFEngine:
    """A transformers causal LM that generates batches and takes new weights by name.

    Args:
        model: the causal LM (in eval mode on its device).
        stop_token_ids: ids that end a reply (EOS of tokenizer and generation config).
        pad_token_id: id used for left padding (never attended to).
        seed: seed of the sampling generator.
        decode: how a batch decodes (`DECODE`): "eager" (transformers' DynamicCache), "static" (a static KV cache,
            `static_decode.StaticDecoder`), "graphs" (that, each step replayed as a CUDA graph; CUDA only).

    Raises:
        ValueError: an unknown `decode`, or one the model or device cannot run.
    """

    DECODE = ("eager", "static", "graphs")
    CHECK_EVERY = 16
    """Decoding steps between two looks at the sampled tokens on the host (stops, max_tokens)."""

    def __init__(
        self, model: Any, stop_token_ids: Iterable[int], pad_token_id: int, seed: int = 0, decode: str = "eager"
    ) -> None:
        if decode not in self.DECODE:
            raise ValueError(f"decode must be one of {self.DECODE}, not {decode!r}")
        self.model = model.eval()
        self.device = next(model.parameters()).device
        self.stop_token_ids = frozenset(int(t) for t in stop_token_ids)
        self.pad_token_id = int(pad_token_id)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        self.decode = decode
        self._static = None if decode == "eager" else StaticDecoder(model, self.pad_token_id, graphs=decode == "graphs")

    def release(self) -> None:
        """Free the static decode's cache and graphs, if any (the next batch makes them again)."""
        if self._static is not None:
            self._static.release()

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        device: str,
        dtype: str = "bfloat16",
        random_weights: bool = False,
        attn_implementation: str = "sdpa",
        seed: int = 0,
        decode: str = "eager",
    ) -> HFEngine:
        """Load the model and its stop ids from a Hugging Face folder.

        Args:
            path: model folder (config, tokenizer, weights unless `random_weights`).
            device: "cuda" or "cpu".
            dtype: torch dtype name, e.g. "bfloat16" or "float32".
            random_weights: build from the config only (verl's `load_format: dummy`; the actor's weights
                arrive with the first sync).
            attn_implementation: transformers attention backend (flash-attn is not assumed).
            seed: sampling seed.
            decode: how a batch decodes (see the class).
        """
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig

        torch_dtype = getattr(torch, dtype)
        config = AutoConfig.from_pretrained(path)
        if random_weights:
            torch.manual_seed(seed)
            model = AutoModelForCausalLM.from_config(
                config, torch_dtype=torch_dtype, attn_implementation=attn_implementation
            )
        else:
            model = AutoModelForCausalLM.from_pretrained(
                path, torch_dtype=torch_dtype, attn_implementation=attn_implementation
            )
        tokenizer = AutoTokenizer.from_pretrained(path)
        stops = set(_ids(tokenizer.eos_token_id))
        try:
            stops |= set(_ids(GenerationConfig.from_pretrained(path).eos_token_id))
        except OSError:
            pass  # no generation_config.json: the tokenizer's EOS is the stop
        vocab = model.get_input_embeddings().num_embeddings
        stops = {t for t in stops if 0 <= t < vocab}
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(stops, default=0)
        return cls(model.to(device), stops, pad, seed=seed, decode=decode)

    @torch.no_grad()
    def load_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> int:
        """Copy tensors into the model by Hugging Face parameter name; returns how many were loaded.

        Raises:
            KeyError: a name the model does not have (the actor and rollout models differ).
        """
        # remove_duplicate=False: a model with tied embeddings (SmolLM2) lists its LM head too, which the actor sends.
        params = dict(self.model.named_parameters(remove_duplicate=False))
        params.update(dict(self.model.named_buffers()))
        loaded = 0
        for name, tensor in named_tensors:
            target = params.get(name)
            if target is None:
                raise KeyError(f"the rollout model has no parameter {name!r}; actor and rollout models differ")
            target.copy_(tensor.to(device=target.device, dtype=target.dtype))  # in place: graphs read this storage
            loaded += 1
        return loaded

    @torch.no_grad()
    def score(self, prompt_ids: Sequence[int], response_ids: Sequence[int], temperature: float = 1.0) -> list[float]:
        """log p(response token | everything before it) under `log_softmax(logits / temperature)`, one pass."""
        ids = torch.tensor([list(prompt_ids) + list(response_ids)], device=self.device)
        logits = self.model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float() / temperature
        targets = torch.tensor(list(response_ids), device=self.device)
        return torch.log_softmax(logits, dim=-1).gather(-1, targets[:, None]).squeeze(-1).tolist()

    @torch.no_grad()
    def generate(self, requests: Sequence[GenRequest], max_steps: int | None = None) -> list[GenResult]:
        """Generate every request in one batch (left-padded, KV-cached); see `GenResult`.

        `max_steps`: decode at most this many tokens; a row with neither a stop token nor its max_tokens by then is
        returned unfinished (`stopped` False, fewer than max_tokens ids) for the caller to continue.
        """
        n, device = len(requests), self.device
        width = max(len(r.prompt_ids) for r in requests)
        ids = torch.full((n, width), self.pad_token_id, dtype=torch.long, device=device)
        mask = torch.zeros((n, width), dtype=torch.long, device=device)
        for i, request in enumerate(requests):
            ids[i, width - len(request.prompt_ids) :] = torch.tensor(request.prompt_ids, device=device)
            mask[i, width - len(request.prompt_ids) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        temperature = torch.tensor([r.temperature for r in requests], device=device, dtype=torch.float32)
        top_p = torch.tensor([r.top_p for r in requests], device=device, dtype=torch.float32)
        top_k = torch.tensor([r.top_k for r in requests], device=device)
        # Which filters apply is the same at every step: decided here once, not by a GPU sync per token.
        filters = (any(r.top_k > 0 for r in requests), any(r.top_p < 1 for r in requests))
        results = [GenResult() for _ in requests]
        done = [False] * n
        steps = max(r.max_tokens for r in requests)
        limit = steps if max_steps is None else min(steps, max_steps)
        decoder = self._static if self._static is not None else _DynamicDecode(self.model)
        logits = decoder.prefill(ids, mask, positions, limit)
        sampled: list[tuple[torch.Tensor, torch.Tensor]] = []
        for step in range(limit):
            tokens, logprobs = self._sample(logits, temperature, top_p, top_k, filters)
            sampled.append((tokens, logprobs))
            # The tokens come to the host every CHECK_EVERY steps, not every step: a sync per token would leave the
            # GPU idle while the next step's launches are made (a small model's decode is launch-bound).
            if len(sampled) == self.CHECK_EVERY or step == limit - 1:
                if self._take(sampled, results, done, requests):
                    break
                sampled = []
            if step < limit - 1:
                logits = decoder.step(tokens)
        return results

    def _take(
        self,
        sampled: list[tuple[torch.Tensor, torch.Tensor]],
        results: list[GenResult],
        done: list[bool],
        requests: Sequence[GenRequest],
    ) -> bool:
        """Append the steps `sampled` to each unfinished row, up to its stop token or max_tokens; whether every row
        is done (the steps a finished row sampled after its end are dropped)."""
        tokens = torch.stack([t for t, _ in sampled]).tolist()
        logprobs = torch.stack([lp for _, lp in sampled]).tolist()
        for step_tokens, step_logprobs in zip(tokens, logprobs, strict=True):
            for i, (token, logprob) in enumerate(zip(step_tokens, step_logprobs, strict=True)):
                if done[i]:
                    continue
                results[i].token_ids.append(token)
                results[i].log_probs.append(logprob)
                results[i].stopped = token in self.stop_token_ids
                done[i] = results[i].stopped or len(results[i].token_ids) >= requests[i].max_tokens
        return all(done)

    def _sample(
        self,
        logits: torch.Tensor,
        temperature: torch.Tensor,
        top_p: torch.Tensor,
        top_k: torch.Tensor,
        filters: tuple[bool, bool],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One token per row, and its log-prob under `log_softmax(logits / T)`; `filters`: (any top-k, any top-p)."""
        greedy = temperature <= 0
        scaled = logits / torch.where(greedy, torch.ones_like(temperature), temperature)[:, None]
        logprobs = torch.log_softmax(scaled, dim=-1)
        filtered = scaled.clone()
        vocab = filtered.shape[-1]
        if filters[0]:
            k = torch.where((top_k > 0) & (top_k < vocab), top_k, torch.full_like(top_k, vocab))
            kth = torch.sort(filtered, dim=-1, descending=True).values.gather(-1, (k - 1)[:, None])
            filtered = filtered.masked_fill(filtered < kth, float("-inf"))
        if filters[1]:
            values, order = torch.sort(filtered, dim=-1, descending=True)
            probs = torch.softmax(values, dim=-1)
            # Drop a token once the mass before it already reaches top_p (the first token always stays).
            drop = (probs.cumsum(-1) - probs) >= top_p[:, None]
            filtered = filtered.scatter(-1, order, values.masked_fill(drop, float("-inf")))
        sampled = torch.multinomial(torch.softmax(filtered, dim=-1), 1, generator=self.generator).squeeze(-1)
        tokens = torch.where(greedy, scaled.argmax(dim=-1), sampled)
        return tokens, logprobs.gather(-1, tokens[:, None]).squeeze(-1)


def _ids(value: Any) -> list[int]:
    if value is None:
        return []
    return [int(v) for v in value] if isinstance(value, list | tuple) else [int(value)]


class _DynamicDecode:
    """The eager decode: transformers' `DynamicCache`, the mask one column longer each step (`StaticDecoder`'s
    contract: `prefill` then `step`, each giving the next logits of every row)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.past: Any = None

    def prefill(self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, steps: int) -> torch.Tensor:
        self.mask, self.positions = mask, positions
        return self._forward(ids)

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        self.mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], dim=1)
        self.positions = self.positions[:, -1:] + 1
        return self._forward(tokens[:, None])

    def _forward(self, ids: torch.Tensor) -> torch.Tensor:
        out = self.model(
            input_ids=ids,
            attention_mask=self.mask,
            position_ids=self.positions,
            past_key_values=self.past,
            use_cache=True,
            # Only the last position's logits are sampled from: the prefill's full [rows, context, vocab] logits
            # (25 GB for 16 rows of 8k tokens in fp32 with SmolLM2's 49k vocabulary) would crowd out training.
            logits_to_keep=1,
        )
        self.past = out.past_key_values
        return out.logits[:, -1, :].float()
