"""Advantage inputs for our trajectories: token-level rewards and GAE over the model's own tokens.

The paper trains with PPO and GAE (gamma = 1, lambda = 0.95) and pre-trains the critic on the
collected trajectories first (stage 4). An episode's response interleaves model tokens (mask 1)
and tool-output tokens (mask 0). Tool tokens are not actions: the critic's value and the TD error
are skipped there, and the advantage runs from one model token to the next model token across
the tool output, as if the tool tokens were not in the sequence. This is what verl's
`compute_gae_advantage_return` does with its `response_mask`; `compute_gae` here is our own
implementation of the same estimator, and the test checks that they agree.

The judge's reward is one number per episode, placed on the *last model token*. verl's
`AgentLoopOutput.as_dict` puts `reward_score` on the last response token; our adapter ends every
response on a model token (it trims trailing tool output, which carries no loss) so that both
places are the same token. A reward on a tool token would be lost: GAE discards the TD error there.
"""

from __future__ import annotations

import torch


def token_level_rewards(response_mask: list[int], reward: float) -> list[float]:
    """Zeros, with `reward` on the last token whose mask is 1 (the last token if none is).

    Args:
        response_mask: 1 on model tokens, 0 on tool-output tokens; shape (response_length,).
        reward: the episode's reward (the judge's, in {-1, 1, 2, 3}).
    """
    rewards = [0.0] * len(response_mask)
    if rewards:
        last = max((i for i, m in enumerate(response_mask) if m), default=len(rewards) - 1)
        rewards[last] = float(reward)
    return rewards


def masked_whiten(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(values - mean) / std over the masked entries; the variance is unbiased, as PPO implementations use."""
    mask = mask.to(values.dtype)
    count = mask.sum()
    mean = (values * mask).sum() / (count + 1e-8)
    var = (((values - mean) ** 2) * mask).sum() / (count + 1e-8) * count / (count - 1)
    return (values - mean) * torch.rsqrt(var + 1e-8)


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    response_mask: torch.Tensor,
    gamma: float = 1.0,
    lam: float = 0.95,
    whiten: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE over model tokens only; tool tokens are skipped.

    For model tokens t < t' consecutive in the mask (tool tokens between them ignored):
    delta_t = r_t + gamma * V_t' - V_t and A_t = delta_t + gamma * lam * A_t'; after the last
    model token, V = A = 0. A tool token carries the advantage of the next model token (it has
    no loss, so only its value is defined, for the same shape).

    Args:
        rewards: (batch, response_length) token-level rewards (see `token_level_rewards`).
        values: (batch, response_length) the critic's values.
        response_mask: (batch, response_length) 1 on model tokens, 0 on tool tokens and padding.
        gamma: discount (1 in the paper).
        lam: GAE lambda (0.95 in the paper).
        whiten: normalise the advantages over the masked tokens of the batch (PPO's usual step).

    Returns:
        (advantages, returns), each (batch, response_length); returns = raw advantages + values.
    """
    rewards, values, mask = rewards.double(), values.double(), response_mask.double()
    advantages = torch.zeros_like(values)
    for row in range(values.shape[0]):
        next_value, next_advantage = 0.0, 0.0
        for t in reversed(range(values.shape[1])):
            if mask[row, t] == 0:
                advantages[row, t] = next_advantage
                continue
            delta = rewards[row, t] + gamma * next_value - values[row, t]
            next_advantage = float(delta + gamma * lam * next_advantage)
            next_value = float(values[row, t])
            advantages[row, t] = next_advantage
    returns = advantages + values
    if whiten:
        advantages = masked_whiten(advantages, mask)
    return advantages.to(response_mask.dtype if response_mask.is_floating_point() else torch.float32), returns.float()
