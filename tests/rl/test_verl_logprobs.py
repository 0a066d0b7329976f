"""`cuda_agent.rl.verl_logprobs`: verl's per-token log-probabilities a block of tokens at a time, equal to verl's own
row-by-row loop in value and gradient, and in verl's place once imported."""

from __future__ import annotations

import pytest

pytest.importorskip("verl", reason="verl is not installed (pip install -e '.[rl]')")

import torch  # noqa: E402
from verl.utils import torch_functional  # noqa: E402

from cuda_agent.rl import verl_logprobs  # noqa: E402


def _verls_loop(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """verl 0.9.1's v2, as written there (the import above has replaced verl's own in this process)."""
    if logits.dtype in (torch.float32, torch.float64):
        picked = torch.gather(logits, dim=-1, index=labels.unsqueeze(-1)).squeeze(-1)
        return picked - torch.stack([torch.logsumexp(row, dim=-1) for row in logits])
    rows = [
        torch.log_softmax(r, dim=-1).gather(-1, y.unsqueeze(-1)).squeeze(-1)
        for r, y in zip(logits, labels, strict=True)
    ]
    return torch.stack(rows)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_blocks_give_verls_values_and_gradients(dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verl_logprobs, "BLOCK_ELEMENTS", 7 * 50)  # 7 rows a block: 300 rows end in a short block
    torch.manual_seed(0)
    logits = (torch.randn(300, 50) * 4).to(dtype)
    labels = torch.randint(0, 50, (300,))
    mine = logits.clone().requires_grad_()
    theirs = logits.clone().requires_grad_()
    got, want = verl_logprobs.logprobs_in_blocks(mine, labels), _verls_loop(theirs, labels)
    assert got.dtype == want.dtype and got.shape == (300,)
    tol = 1e-6 if dtype == torch.float32 else 2e-2
    assert torch.allclose(got.float(), want.float(), atol=tol, rtol=0)
    weights = torch.linspace(-1, 1, 300)
    (got.float() * weights).sum().backward()
    (want.float() * weights).sum().backward()
    assert torch.allclose(mine.grad.float(), theirs.grad.float(), atol=tol, rtol=0)


def test_leading_dimensions_are_kept_and_the_import_replaces_verls_function() -> None:
    torch.manual_seed(1)
    logits, labels = torch.randn(2, 5, 11), torch.randint(0, 11, (2, 5))
    got = verl_logprobs.logprobs_in_blocks(logits, labels)
    assert got.shape == (2, 5)
    assert torch.allclose(got, torch.log_softmax(logits, -1).gather(-1, labels[..., None])[..., 0], atol=1e-6)
    assert torch_functional.logprobs_from_logits_v2 is verl_logprobs.logprobs_in_blocks
    if not torch_functional.FLAH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE:  # verl's dispatcher reaches ours
        assert torch.equal(torch_functional.logprobs_from_logits(logits, labels), got)
