"""The verdict's timings from a run's and the baselines' results: intervals, drift and the reward's basis."""

from __future__ import annotations

import pytest

from cuda_agent.judge.basis import verdict_timings
from cuda_agent.judge.config import JudgeConfig
from cuda_agent.judge.protocol import BaselineResult, RunResult
from cuda_agent.reward import reward_of

CPU_FLOOR = JudgeConfig().timing_noise_floor["cpu"]


def _phase(median: float, half: float = 0.005) -> dict:
    return {"median_ms": median, "ci_ms": [median * (1 - half), median * (1 + half)], "reps": 200}


BASE = BaselineResult(eager=_phase(0.0614), compile=_phase(0.155))


@pytest.mark.parametrize(("solution", "eager_now"), [(0.050, 0.0615), (0.061, 0.075)])
def test_a_cached_baseline_is_rescaled_by_eagers_time_now_so_that_load_moves_both_alike(solution, eager_now) -> None:
    """Two runs of the CPU demo's candidate, minutes apart: 0.050 and 0.061 ms against one cached eager time of
    0.0614 ms (rewards 3 and 1 by the point rule). Eager timed again beside each (the second run's machine was
    busier) puts both at the same ratio, and the reward does not flip."""
    env: dict = {}
    run = RunResult(status="ok", timing=_phase(solution), eager_now=_phase(eager_now))
    timings = verdict_timings(run, BASE, CPU_FLOOR, env)
    drift = eager_now / 0.0614
    assert env["timing"]["drift"] == pytest.approx(drift)
    assert timings.eager == pytest.approx(0.0614 * drift) and timings.compile == pytest.approx(0.155 * drift)
    low, high = timings.eager_ci
    assert low == pytest.approx(0.0614 * drift * 0.97) and high == pytest.approx(0.0614 * drift * 1.03)  # CPU floor
    assert reward_of("pass", timings) == 3


def test_without_eager_now_the_cached_baseline_decides_at_the_noise_floor() -> None:
    env: dict = {}
    timings = verdict_timings(RunResult(status="ok", timing=_phase(0.0584)), BASE, CPU_FLOOR, env)
    assert "timing" not in env and timings.eager == 0.0614  # 0.0584 is 0.95 of eager: a point-rule 3
    assert timings.basis == "call" and "no kernel times" in env["timing_basis"]
    assert reward_of("pass", timings) == 1  # within the noise


def test_kernel_times_from_the_run_and_the_baselines_reach_the_verdict() -> None:
    base = BaselineResult(
        eager=_phase(0.0348) | {"kernel": _phase(0.00226)}, compile=_phase(0.0723) | {"kernel": _phase(0.00103)}
    )
    run = RunResult(status="ok", timing=_phase(0.0581), kernel_timing=_phase(0.00117))
    env: dict = {}
    timings = verdict_timings(run, base, 0.01, env, kernel_basis=True)
    assert timings.basis == "kernel" and timings.kernel.solution == 0.00117 and timings.kernel.compile == 0.00103
    assert timings.kernel.eager_ci == pytest.approx((0.00226 * 0.99, 0.00226 * 1.01))
    assert reward_of("pass", timings) == 2


def test_by_default_the_reward_never_rests_on_the_candidates_kernel_time_claim() -> None:
    """The candidate's kernel time comes from the profiler in its own process: reported, but the whole calls
    (bounded from outside) decide unless the kernel basis is asked for."""
    base = BaselineResult(
        eager=_phase(0.0348) | {"kernel": _phase(0.00226)}, compile=_phase(0.0723) | {"kernel": _phase(0.00103)}
    )
    run = RunResult(status="ok", timing=_phase(0.0581), kernel_timing=_phase(0.00001))  # a forged reading
    env: dict = {}
    timings = verdict_timings(run, base, 0.01, env)
    assert timings.basis == "call" and "kernel basis is off" in env["timing_basis"]
    assert timings.kernel.solution == 0.00001 and reward_of("pass", timings) == 1
