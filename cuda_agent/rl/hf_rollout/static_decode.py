"""`HFEngine`'s decode on a static KV cache, each one-token step optionally replayed as a CUDA graph.

A decode step of a small model (SmolLM2-135M: 30 layers, ~600 kernels) costs its launches and its Python, not its
arithmetic: transformers' `DynamicCache` grows by a column a step (new shapes, new allocations), so nothing repeats.
Here everything a step reads or writes has a shape fixed per bucket: rows rounded up to a power of two, the cache
length (prompt + tokens to decode) up to a multiple of `CACHE_STEP`. The step (attend over the whole cache under a
visibility mask, write the new key/value at the slot, advance the slot and positions) is then the same computation
on the same buffers every time, and with `graphs` it is captured once per bucket (`torch.cuda.CUDAGraph`) and
replayed. Sampling stays outside the graph: it uses the engine's seeded generator as the eager path does.

With sdpa and grouped KV heads (SmolLM2: 9 query heads on 3), the step attends through `grouped_sdpa`: transformers'
sdpa copies every cached key and value once per query head sharing it (`repeat_kv`: 16 rows of 5k tokens in fp32
move ~30 GB a step, ~10 ms on an H100), where one query token a row can instead be read as a KV head's group of
queries, which attends to that head's cache as it is.

The result is the eager path's: the prefill is one ordinary forward over the prompts (its keys and values copied into
the cache), positions count each row's real tokens, and a row never sees a padding column or another row's slot, so
the log-probs match the actor's unpadded recomputation up to float rounding. The weights are read in place by the
graphs: `HFEngine.load_weights` copies into the same parameter storage, so a graph replays with the synced policy.

Independent of the transformers version on purpose: the cache is our own object with the one method every version's
attention layers call, `update(key_states, value_states, layer_idx, ...)`, and the masks are 4D tensors, which
transformers passes through unchanged; its `StaticCache` and mask builders changed their contracts between 4.x and
5.x (cache positions as an argument, then as state of the layer). Supported attention implementations: `sdpa` (a
boolean mask) and `eager` (an additive one); a model whose rotary embedding depends on the sequence length (dynamic
RoPE scaling) cannot be captured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

ATTENTION = ("sdpa", "eager")
GROUPED = "cuda_agent_grouped_sdpa"
"""The name `grouped_sdpa` is registered under in transformers' `AttentionInterface` (the decode step uses it)."""


def rows_bucket(rows: int) -> int:
    """The batch rows a decode step runs with: the next power of two (1, 2, 4, 8, 16, ...)."""
    return 1 << max(0, rows - 1).bit_length()


def length_bucket(length: int, step: int) -> int:
    """Cache columns for `length` tokens: the next multiple of `step`."""
    return max(1, -(-length // step)) * step


def grouped_sdpa(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' sdpa attention, except for one query token a row with grouped KV heads: query head h uses KV
    head h // group (`repeat_kv`'s order), so the query is viewed as [rows, kv_heads, group, head_dim], a group of
    queries per KV head, and attends to the keys and values without copying them per query head."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    rows, heads, length, dim = query.shape
    kv_heads = key.shape[1]
    if length != 1 or heads == kv_heads or dropout:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    grouped = query.reshape(rows, kv_heads, heads // kv_heads, dim)
    out = torch.nn.functional.scaled_dot_product_attention(grouped, key, value, attn_mask=attention_mask, scale=scaling)
    return out.reshape(rows, heads, 1, dim).transpose(1, 2).contiguous(), None


class StaticKV:
    """A KV cache of fixed shape that a transformers model writes through `update` (its `past_key_values`).

    Per layer, keys and values of shape [rows, kv_heads, length, head_dim]. During the prefill the prompt's keys and
    values go to columns [0, width) of the first rows and attention uses them alone (the eager prefill's own
    computation); a decode step writes its one column at `slot` and attends over every column (the mask hides the
    ones a row must not see).
    """

    def __init__(self, keys: list[torch.Tensor], values: list[torch.Tensor], slot: torch.Tensor) -> None:
        self.keys, self.values, self.slot = keys, values, slot
        self.prefilling = False

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values = self.keys[layer_idx], self.values[layer_idx]
        if self.prefilling:
            rows, width = key_states.shape[0], key_states.shape[-2]
            keys[:rows, :, :width].copy_(key_states)
            values[:rows, :, :width].copy_(value_states)
            return key_states, value_states
        keys.index_copy_(2, self.slot, key_states)
        values.index_copy_(2, self.slot, value_states)
        return keys, values


class _Storage:
    """One flat key and one flat value buffer per layer; every bucket's cache is a view of their first elements.

    Only one batch decodes at a time, so all buckets share the memory of the largest: it grows (and the buckets made
    on the old buffers are dropped) when a bucket needs more than any before it.
    """

    def __init__(self, layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype, device: torch.device) -> None:
        self.layers, self.kv_heads, self.head_dim = layers, kv_heads, head_dim
        self.dtype, self.device = dtype, device
        self.capacity = 0
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []

    def fits(self, rows: int, length: int) -> bool:
        return rows * length <= self.capacity

    def grow(self, rows: int, length: int) -> None:
        self.keys, self.values = [], []  # freed before the larger buffers are made
        size = rows * length * self.kv_heads * self.head_dim
        # Zeros, not empty: a column no row may see is still multiplied by 0 in attention, and 0 * NaN is NaN.
        make = lambda: torch.zeros(size, dtype=self.dtype, device=self.device)  # noqa: E731
        self.keys = [make() for _ in range(self.layers)]
        self.values = [make() for _ in range(self.layers)]
        self.capacity = rows * length

    def views(self, rows: int, length: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        shape = (rows, self.kv_heads, length, self.head_dim)
        size = rows * length * self.kv_heads * self.head_dim
        return [k[:size].view(shape) for k in self.keys], [v[:size].view(shape) for v in self.values]


@dataclass
class _Bucket:
    """The fixed buffers of one (rows, length) shape, and its captured step when graphs are on."""

    ids: torch.Tensor  # [rows, 1] the token each row feeds this step
    positions: torch.Tensor  # [rows, 1] its position (real tokens before it)
    slot: torch.Tensor  # [1] the cache column this step writes
    visible: torch.Tensor  # [rows, 1, 1, length] which columns each row attends to
    cache: StaticKV
    graph: torch.cuda.CUDAGraph | None = None
    logits: torch.Tensor | None = None  # the graph's output, rewritten by each replay


class StaticDecoder:
    """Prefill and one-token steps on a static KV cache, with the step as a CUDA graph when `graphs` (CUDA only).

    Same contract as the eager path in `engine.py`: `prefill(ids, mask, positions, steps)` gives the last position's
    logits of each row, then `step(tokens)` feeds each row its sampled token and gives the next logits ([rows, vocab],
    float32). Buffers and graphs persist across batches until `release`.

    Raises:
        ValueError: the model's attention implementation is not supported, or graphs without CUDA.
    """

    CACHE_STEP = 512
    """Cache lengths are multiples of this: a step attends over up to this many columns more than it needs, and a
    8k context has 16 lengths (times 5 row counts up to 16: at most 80 graphs, each captured once)."""
    WARMUP = 2
    """Eager runs of a new bucket's step before its capture (lazy initialisations must not happen in the graph)."""

    def __init__(self, model: Any, pad_token_id: int, graphs: bool) -> None:
        config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        attention = getattr(config, "_attn_implementation", None) or "eager"
        if attention not in ATTENTION:
            raise ValueError(f"the static decode supports attention {ATTENTION}, not {attention!r}")
        device = next(model.parameters()).device
        if graphs and device.type != "cuda":
            raise ValueError(f"CUDA graphs need the model on a CUDA device, not {device}")
        self.model, self.pad_token_id, self.graphs = model, pad_token_id, graphs
        self.additive = attention == "eager"  # eager attention adds its mask to the scores; sdpa takes booleans
        self.attention = attention
        if attention == "sdpa":
            from transformers import AttentionInterface

            AttentionInterface.register(GROUPED, grouped_sdpa)
        heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        kv_heads = getattr(config, "num_key_value_heads", None) or heads
        dtype = next(model.parameters()).dtype
        self.storage = _Storage(config.num_hidden_layers, kv_heads, head_dim, dtype, device)
        self.buckets: dict[tuple[int, int], _Bucket] = {}
        self.captures = 0
        """Graphs captured so far (a bucket's first batch, or again after the storage grew)."""
        self._pool = torch.cuda.graph_pool_handle() if graphs else None
        self._bucket: _Bucket | None = None
        self._rows = 0

    def release(self) -> None:
        """Free the cache, the buffers and the graphs (the next batch makes them again)."""
        self._drop_buckets()
        self.storage.grow(0, 0)

    def _drop_buckets(self) -> None:
        """Forget every bucket (their views and graphs hold the storage); later graphs take a fresh memory pool."""
        self.buckets.clear()
        self._bucket = None
        if self.graphs:
            self._pool = torch.cuda.graph_pool_handle()

    def prefill(self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, steps: int) -> torch.Tensor:
        """Run the prompts (left-padded `ids`, `mask` 1 on real tokens, `positions`) for a batch that samples at most
        `steps` tokens; the last position's logits of each row."""
        rows, width = ids.shape
        bucket = self._get(rows_bucket(rows), length_bucket(width + max(steps - 1, 0), self.CACHE_STEP))
        self._bucket, self._rows = bucket, rows
        bucket.visible.zero_()
        bucket.visible[:rows, 0, 0, :width] = mask.bool()
        bucket.ids.fill_(self.pad_token_id)
        bucket.positions.zero_()
        bucket.positions[:rows] = positions[:, -1:] + 1
        bucket.slot.fill_(width)
        causal = torch.ones(width, width, dtype=torch.bool, device=ids.device).tril()
        # A padding position sees itself too: no query row is fully masked (sdpa would give NaN there, which would
        # reach the cache through the next layer); no real position ever attends to it.
        sees = (causal & mask.bool()[:, None, None, :]) | torch.eye(width, dtype=torch.bool, device=ids.device)
        bucket.cache.prefilling = True
        try:
            out = self.model(
                input_ids=ids,
                attention_mask=self._mask(sees),
                position_ids=positions,
                past_key_values=bucket.cache,
                use_cache=True,
                logits_to_keep=1,
            )
        finally:
            bucket.cache.prefilling = False
        return out.logits[:, -1, :].float()

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """Feed each row its sampled token; the next logits of the batch's rows."""
        bucket = self._bucket
        if bucket is None:
            raise RuntimeError("step before prefill")
        bucket.ids[: self._rows, 0].copy_(tokens)
        if bucket.graph is not None:
            bucket.graph.replay()
            logits = bucket.logits
        else:
            logits = self._forward(bucket)
        return logits[: self._rows]

    def _forward(self, bucket: _Bucket) -> torch.Tensor:
        """The decode step: what a graph captures (only device work on the bucket's buffers)."""
        bucket.visible.index_fill_(-1, bucket.slot, True)  # every row sees the column this step writes
        if self.attention == "sdpa":
            self.model.config._attn_implementation = GROUPED  # for this call only: the prefill and `score` keep sdpa
        try:
            out = self.model(
                input_ids=bucket.ids,
                attention_mask=self._mask(bucket.visible),
                position_ids=bucket.positions,
                past_key_values=bucket.cache,
                use_cache=True,
                logits_to_keep=1,
            )
        finally:
            self.model.config._attn_implementation = self.attention
        logits = out.logits[:, -1, :].float()
        bucket.positions.add_(1)
        bucket.slot.add_(1)
        return logits

    def _mask(self, visible: torch.Tensor) -> torch.Tensor:
        if not self.additive:
            return visible
        dtype = self.storage.dtype
        return torch.zeros(visible.shape, dtype=dtype, device=visible.device).masked_fill(
            ~visible, torch.finfo(dtype).min
        )

    def _get(self, rows: int, length: int) -> _Bucket:
        bucket = self.buckets.get((rows, length))
        if bucket is not None:
            return bucket
        if not self.storage.fits(rows, length):
            self._drop_buckets()
            self.storage.grow(rows, length)
        device = self.storage.device
        keys, values = self.storage.views(rows, length)
        slot = torch.zeros(1, dtype=torch.long, device=device)
        bucket = _Bucket(
            ids=torch.full((rows, 1), self.pad_token_id, dtype=torch.long, device=device),
            positions=torch.zeros((rows, 1), dtype=torch.long, device=device),
            slot=slot,
            visible=torch.zeros((rows, 1, 1, length), dtype=torch.bool, device=device),
            cache=StaticKV(keys, values, slot),
        )
        if self.graphs:
            self._capture(bucket)
        self.buckets[(rows, length)] = bucket
        return bucket

    def _capture(self, bucket: _Bucket) -> None:
        """Capture the bucket's step; the warm-up runs write garbage to its buffers, which `prefill` resets (and to
        cache columns that no row sees before a step writes them again)."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(self.WARMUP):
                self._forward(bucket)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        # One memory pool for every graph: they never run at once, and each output is read before another replays.
        # thread_local: the server's other threads may touch CUDA meanwhile, which a global capture would refuse.
        with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
            bucket.logits = self._forward(bucket)
        bucket.graph = graph
        self.captures += 1
