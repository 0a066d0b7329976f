import pytest

from cuda_agent.reward import compute_reward


@pytest.mark.parametrize(
    ("verdict", "solution", "eager", "compile_", "reward"),
    [
        ("pass", 0.90, 1.0, 1.0, 3),
        ("pass", 0.95, 1.0, 1.0, 1),  # exactly 5% faster is not "more than 5%"
        ("pass", 0.949, 1.0, 1.0, 3),
        ("pass", 0.90, 1.0, 0.5, 2),
        ("pass", 1.20, 1.0, 1.0, 1),
        ("pass", 0.90, 1.0, None, 3),  # no compile baseline: eager is the bar
        ("pass", None, None, None, 1),  # untimed
        ("incorrect", 0.1, 1.0, 1.0, -1),
        ("rejected", 0.1, 1.0, 1.0, -1),
        ("compile_error", None, None, None, -1),
        ("timeout", None, None, None, -1),
    ],
)
def test_paper_reward_rule(verdict: str, solution, eager, compile_, reward: int) -> None:
    assert compute_reward(verdict, solution, eager, compile_) == reward
