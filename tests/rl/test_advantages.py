"""The advantages verl computes from our episodes: the reward's token and GAE across tool output.

The paper trains with PPO and GAE (gamma = 1, lambda = 0.95). An episode's response interleaves model tokens
(mask 1) and tool-output tokens (mask 0). Tool tokens are not actions: verl's `compute_gae_advantage_return`
skips the critic's value and the TD error where the mask is 0, so the advantage runs from one model token to the
next across the tool output, as if it were not in the sequence. The judge's reward is one number per episode,
which verl's `AgentLoopOutput.as_dict` puts on the last response token: `token_record` ends every response on a
model token (trailing tool output carries no loss), so that token is the last model token. A reward on a tool
token would be lost.
"""

from __future__ import annotations

import pytest
import torch

from cuda_agent.rl.rollout import token_record

core_algos = pytest.importorskip("verl.trainer.ppo.core_algos", reason="verl is not installed (pip install -e '.[rl]')")

# Two episodes, 10 response tokens each: model tokens (1), tool output (0), and right padding (0).
MASKS = [
    [1, 1, 1, 0, 0, 0, 1, 1, 0, 1],  # reply, tool output, reply, tool output, final reply
    [1, 1, 0, 0, 1, 1, 1, 0, 0, 0],  # reply, tool output, final reply, padding
]
REWARDS = [3.0, -1.0]
VALUES = [
    [0.5, 0.7, 0.9, 9.0, 9.0, 9.0, 1.2, 1.5, 9.0, 2.0],  # 9.0 on tool tokens: must not matter
    [-0.2, -0.4, 5.0, 5.0, -0.6, -0.8, -0.9, 5.0, 5.0, 5.0],
]


def _on_last_token(ids: list[int], mask: list[int], reward: float, length: int) -> list[float]:
    """verl's placement (as_dict): the reward on the last token of the response `token_record` returns."""
    kept, _, _ = token_record(ids, mask, None, length)
    return [0.0] * (len(kept) - 1) + [reward] + [0.0] * (length - len(kept))


def _gae(rewards: list[list[float]], values: list[list[float]], masks: list[list[int]]):
    return core_algos.compute_gae_advantage_return(
        token_level_rewards=torch.tensor(rewards),
        values=torch.tensor(values),
        response_mask=torch.tensor(masks, dtype=torch.float32),
        gamma=1.0,
        lam=0.95,
    )


def test_token_record_ends_on_a_model_token_within_the_budget() -> None:
    ids = list(range(100, 110))
    assert token_record(ids, MASKS[1], None, 10)[:2] == (ids[:7], MASKS[1][:7])  # padding and tool output dropped
    assert token_record(ids, MASKS[0], [0.1] * 10, 6) == (ids[:3], [1, 1, 1], [0.1] * 3)  # capped, then trimmed
    assert _on_last_token(ids, MASKS[1], -1.0, 10) == [0, 0, 0, 0, 0, 0, -1.0, 0, 0, 0]


def test_verl_gae_over_our_masks_is_gae_over_the_model_tokens_alone() -> None:
    """Each episode's advantages and returns at its model tokens equal those of the same episode with its tool
    output cut out (and whitening, over model tokens only, sees the same numbers); tool tokens' values are unread."""
    ids = list(range(10))
    rewards = [_on_last_token(ids, m, r, 10) for m, r in zip(MASKS, REWARDS, strict=True)]
    advantages, returns = _gae(rewards, VALUES, MASKS)

    kept = [[i for i, bit in enumerate(m) if bit] for m in MASKS]
    width = max(len(k) for k in kept)

    def squeeze(rows: list[list[float]]) -> list[list[float]]:  # model tokens only, right-padded with zeros
        return [[row[i] for i in k] + [0.0] * (width - len(k)) for row, k in zip(rows, kept, strict=True)]

    masks_alone = [[1] * len(k) + [0] * (width - len(k)) for k in kept]
    advantages_alone, returns_alone = _gae(squeeze(rewards), squeeze(VALUES), masks_alone)
    for row, k in enumerate(kept):
        assert torch.allclose(advantages[row, k], advantages_alone[row, : len(k)], atol=1e-5)
        assert torch.allclose(returns[row, k], returns_alone[row, : len(k)], atol=1e-5)

    other_tool_values = [
        [v if bit else -7.0 for v, bit in zip(vs, m, strict=True)] for vs, m in zip(VALUES, MASKS, strict=True)
    ]
    advantages_other, returns_other = _gae(rewards, other_tool_values, MASKS)
    on = torch.tensor(MASKS).bool()
    assert torch.allclose(advantages[on], advantages_other[on]) and torch.allclose(returns[on], returns_other[on])


def test_a_hand_computed_episode() -> None:
    """Model tokens with values 1 and 2 around one tool token, reward 3 on the last; gamma 1, lambda 0.95:
    returns are 3 (last) and 0 + 2 + 0.95 * 1 = 2.95 (first), across the tool token."""
    _, returns = core_algos.compute_gae_advantage_return(
        token_level_rewards=torch.tensor([[0.0, 0.0, 3.0]]),
        values=torch.tensor([[1.0, 7.0, 2.0]]),
        response_mask=torch.tensor([[1.0, 0.0, 1.0]]),
        gamma=1.0,
        lam=0.95,
    )
    assert torch.allclose(returns[0, [0, 2]], torch.tensor([2.95, 3.0]))
