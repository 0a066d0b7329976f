import pytest

from cuda_agent.judge.child.timing import decision_interval
from cuda_agent.judge.config import JudgeConfig
from cuda_agent.reward import compute_reward, reward_of
from cuda_agent.types import Timings


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


@pytest.mark.parametrize(
    ("solution_ci", "eager_ci", "compile_ci", "reward"),
    [
        ((0.88, 0.92), (0.98, 1.02), (0.98, 1.02), 3),  # 0.92 < 0.95 * 0.98: faster across the intervals
        ((0.88, 0.94), (0.98, 1.02), (0.98, 1.02), 1),  # medians 10 % apart, but within the noise: a tie
        ((0.88, 0.92), (0.98, 1.02), (0.90, 1.30), 2),  # compile's interval reaches down to the candidate's
        ((0.88, 0.92), (0.98, 1.02), None, 3),  # no interval for compile: its point time decides
    ],
)
def test_margins_are_decided_across_the_intervals(solution_ci, eager_ci, compile_ci, reward: int) -> None:
    timings = Timings(
        solution=0.9, eager=1.0, compile=1.0, solution_ci=solution_ci, eager_ci=eager_ci, compile_ci=compile_ci
    )
    assert reward_of("pass", timings) == reward
    assert reward_of("incorrect", timings) == -1


def test_the_demo_candidate_does_not_flip_between_runs() -> None:
    """The CPU demo's candidate measured 0.0952 and 0.0991 ms in two runs; against a cached eager time whose 0.95
    lies between them (0.1015 ms here), the point rule gives 3 and 1. At the CPU's noise floor (3 %) both are a tie."""
    eager = 0.1015
    floor = JudgeConfig().timing_noise_floor["cpu"]
    eager_ci = decision_interval({"median_ms": eager, "ci_ms": [eager * 0.995, eager * 1.005]}, floor)
    rewards = set()
    for solution in (0.0952, 0.0991):
        assert compute_reward("pass", solution, eager, eager) == (3 if solution == 0.0952 else 1)
        solution_ci = decision_interval({"median_ms": solution, "ci_ms": [solution * 0.99, solution * 1.01]}, floor)
        timings = Timings(solution=solution, eager=eager, compile=eager, solution_ci=solution_ci, eager_ci=eager_ci)
        rewards.add(reward_of("pass", timings))
    assert rewards == {1}
