"""verl's per-token log-probabilities without flash-attn: blocks of tokens, not one token at a time.

Where flash-attn's cross-entropy kernel is missing (our GPU image, every CPU), verl 0.9.1 takes each token's
log-probability in `verl.utils.torch_functional.logprobs_from_logits_v2`, a Python loop of one `logsumexp` (fp32)
or `log_softmax` (bf16) per row, and its FSDP engine hands it every token of a micro-batch as a row (the answers
packed into one (tokens, vocabulary) matrix). On a GPU the loop is launch-bound: the curriculum's 16 answers of
~2,200 tokens are 35k launches forward and more backward. On the H100 (2026-12-05,
bench/results/h100-2026-12-05-b/) the actor's update took 8.5 s a step and its log-probs 2.9 s, against 0.3 s and
0.1 s for the critic, which has the same body and no language-model head.

Importing this module (verl does, through the config's external-library hook that `cuda_agent.rl.launch` sets)
puts `logprobs_in_blocks` in that function's place: the same arithmetic over blocks of rows. The loop was there
to bound peak memory; a block holds at most `BLOCK_ELEMENTS` logits, so the temporaries stay that small. verl's
flash-attn and NPU paths are left alone (`logprobs_from_logits` calls v2 only without them). This replaces one
function of verl's, by design; verl's other entry points (`use_fused_kernels`) fail with FSDP2, which shards the
language-model head apart from the body that the fused path reads it in.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

BLOCK_ELEMENTS = 1 << 26  # 256 MB of fp32 logits a block (the tiny model: ~18k tokens of a 3,564-token vocabulary)


def logprobs_in_blocks(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[label] for every row, as verl's `logprobs_from_logits_v2` computes it, a block at a time.

    Args:
        logits: (..., vocabulary) scores.
        labels: (...) token ids.

    Returns:
        (...) log-probabilities in the logits' dtype (as v2).
    """
    vocabulary = logits.shape[-1]
    flat, flat_labels = logits.reshape(-1, vocabulary), labels.reshape(-1)
    rows = max(1, BLOCK_ELEMENTS // max(vocabulary, 1))
    parts = []
    for start in range(0, flat.shape[0], rows):
        block, picked = flat[start : start + rows], flat_labels[start : start + rows].unsqueeze(-1)
        if block.dtype in (torch.float32, torch.float64):
            parts.append(block.gather(-1, picked).squeeze(-1) - torch.logsumexp(block, dim=-1))
        else:  # as v2: logsumexp is unstable in bf16, log_softmax is not
            parts.append(F.log_softmax(block, dim=-1).gather(-1, picked).squeeze(-1))
    if not parts:
        return flat.new_zeros(labels.shape)
    return torch.cat(parts).reshape(labels.shape)


def install() -> None:
    """Put `logprobs_in_blocks` in the place of verl's row-by-row function (idempotent; `verl_compat`)."""
    from cuda_agent.rl.verl_compat import replace_logprobs

    replace_logprobs(logprobs_in_blocks)


install()
