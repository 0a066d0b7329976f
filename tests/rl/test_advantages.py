"""Our advantage inputs and GAE agree with verl's `compute_gae_advantage_return` (gamma 1, lambda 0.95)."""

from __future__ import annotations

import pytest
import torch

from cuda_agent.rl.advantages import compute_gae, token_level_rewards

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


def test_reward_sits_on_the_last_model_token() -> None:
    assert token_level_rewards(MASKS[1], -1.0) == [0, 0, 0, 0, 0, 0, -1.0, 0, 0, 0]
    assert token_level_rewards([1, 0, 0], 2.0) == [2.0, 0, 0]


def test_hand_computed_case_without_whitening() -> None:
    # Model tokens only: values 1, 2; reward 3 on the last. gamma 1, lambda 0.5.
    # A_1 = 3 - 2 = 1;  A_0 = (0 + 2 - 1) + 0.5 * 1 = 1.5;  the tool token carries A_1.
    mask = torch.tensor([[1, 0, 1]])
    rewards = torch.tensor([token_level_rewards([1, 0, 1], 3.0)])
    advantages, returns = compute_gae(rewards, torch.tensor([[1.0, 7.0, 2.0]]), mask, gamma=1.0, lam=0.5, whiten=False)
    assert advantages.tolist() == [[1.5, 1.0, 1.0]]
    assert returns.tolist() == [[2.5, 8.0, 3.0]]


def test_gae_matches_verl() -> None:
    core_algos = pytest.importorskip(
        "verl.trainer.ppo.core_algos", reason="verl is not installed (pip install -e '.[rl]')"
    )
    mask = torch.tensor(MASKS, dtype=torch.float32)
    rewards = torch.tensor([token_level_rewards(m, r) for m, r in zip(MASKS, REWARDS, strict=True)])
    values = torch.tensor(VALUES)
    ours_advantages, ours_returns = compute_gae(rewards, values, mask, gamma=1.0, lam=0.95)
    verl_advantages, verl_returns = core_algos.compute_gae_advantage_return(
        token_level_rewards=rewards, values=values, response_mask=mask, gamma=1.0, lam=0.95
    )
    on = mask.bool()
    assert torch.allclose(ours_returns[on], verl_returns[on], atol=1e-5)
    assert torch.allclose(ours_advantages[on], verl_advantages[on], atol=1e-5)
    assert torch.allclose(ours_advantages, verl_advantages, atol=1e-5)  # tool tokens too
