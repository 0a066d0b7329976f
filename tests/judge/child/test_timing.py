"""The timed phase's budget and how often later timed outputs are judged (timing.time_phase, late_check_chance)."""

from __future__ import annotations

import math
import statistics

import pytest

from cuda_agent.judge.child.timing import (
    SKIP_PASS_CHANCE,
    Clock,
    PhaseBudget,
    decision_interval,
    late_check_chance,
    median_interval,
    narrow_enough,
    time_phase,
)


class _FakeTime:
    """A clock that moves only when a call or an input draw says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _phase(spent_by_wall: bool) -> int:
    clock = _FakeTime()
    started = clock.now

    def inputs_for(i: int) -> list:
        clock.now += 0.002  # a fresh draw, outside the timed window, as costly as two calls
        return []

    def call(inputs: list) -> None:
        clock.now += 0.001

    phase = time_phase(
        call,
        inputs_for,
        Clock(clock, None, None),
        lambda: None,
        "cpu",
        warmup_reps=0,
        min_reps=5,
        max_reps=1000,
        target_phase_s=0.03,
        spent=(lambda: clock.now - started) if spent_by_wall else None,
    )
    assert all(ms == pytest.approx(1.0) for ms in phase.times_ms)
    return len(phase.times_ms)


def test_a_phase_stops_when_its_budget_is_spent_by_the_timed_windows_or_by_the_wall_clock() -> None:
    assert _phase(spent_by_wall=False) == 30  # 30 ms of timed calls
    assert _phase(spent_by_wall=True) == 10  # 30 ms of the phase, draws included


def _chance(pace_s: float, min_reps: int = 10) -> float:
    """The chance after the first min_reps calls took `pace_s` each, at the judge's defaults."""
    return late_check_chance(pace_s * min_reps, min_reps, max_reps=200, target_phase_s=1.0)


@pytest.mark.parametrize(("pace_s", "calls_expected"), [(0.0087, 115), (0.001, 200), (0.03, 34)])
def test_later_outputs_are_judged_so_that_skipping_half_the_calls_passes_one_time_in_a_hundred(
    pace_s: float, calls_expected: int
) -> None:
    chance = _chance(pace_s)
    must_skip = calls_expected // 2 + 1  # the calls a solution must skip to move the median, all of them later ones
    assert (1 - chance) ** must_skip == pytest.approx(SKIP_PASS_CHANCE, rel=0.05)
    assert (1 - chance) ** (must_skip - 10) > SKIP_PASS_CHANCE  # and not much more often than that


def test_slower_early_calls_raise_the_later_chance_and_too_few_later_calls_need_none() -> None:
    assert _chance(0.02) > _chance(0.01) > _chance(0.005) > 0
    assert _chance(0.05) == 0.0  # 20 calls in all: skipping 11 takes an early one, which TIMED_CHECKS judge


def test_external_bound_takes_an_honest_report_as_it_is() -> None:
    from cuda_agent.judge.child.timing import external_bound

    overhead = [0.050, 0.052, 0.049, 0.051, 0.060, 0.050, 0.048, 0.055]
    claimed = [1.0, 1.01, 0.99, 1.02, 1.0] * 4
    external = [c + o for c, o in zip(claimed, overhead * 3, strict=False)]
    phase = external_bound(claimed, external, overhead, "cuda")
    assert not phase["bound_applied"] and phase["median_ms"] == pytest.approx(1.0, abs=0.011)


def test_external_bound_sees_a_clock_that_reports_less_than_the_call_took() -> None:
    from cuda_agent.judge.child.timing import external_bound

    overhead = [0.050, 0.052, 0.049, 0.051, 0.060, 0.050, 0.048, 0.055]
    real = [1.0, 1.01, 0.99, 1.02, 1.0] * 4
    external = [r + o for r, o in zip(real, overhead * 3, strict=False)]
    faked = [0.001] * len(real)
    phase = external_bound(faked, external, overhead, "cuda")
    assert phase["bound_applied"] and phase["median_ms"] == pytest.approx(1.0, abs=0.02)


def test_external_bound_sees_work_hidden_before_the_clock_under_heavy_noise() -> None:
    # A loaded machine: the overhead swings by milliseconds, but every call also carries 0.5 ms of work its clock
    # left out; the least gap shows it where medians cannot.
    from cuda_agent.judge.child.timing import external_bound

    overhead = [0.2, 3.0, 0.21, 5.0, 0.2, 0.8, 2.5, 0.22]
    claimed = [0.1] * 24
    external = [0.1 + 0.5 + o for o in overhead * 3]
    phase = external_bound(claimed, external, overhead, "cpu")
    assert phase["bound_applied"] and phase["median_ms"] >= 0.59


def test_external_bound_takes_a_tiny_honest_kernel_beside_a_large_overhead_as_it_reported() -> None:
    # The figures of an honest 0.04 ms relu on an H100 (bench/results/h100-2026-12-06-e/): 1.1 ms of the grader's own cost per call, and
    # the phase's least gap 0.11 ms above the calibration's. Below the outside view's resolution: the report stands.
    from cuda_agent.judge.child.timing import external_bound

    overhead = [1.10 + 0.002 * i for i in range(16)]
    claimed = [0.039] * 200
    external = [0.039 + 1.10 + 0.112 + 0.01 * (i % 7) for i in range(200)]
    phase = external_bound(claimed, external, overhead, "cuda")
    assert not phase["bound_applied"] and phase["median_ms"] == pytest.approx(0.039)


def _noisy_phase(times: list[float], budget: PhaseBudget | None) -> int:
    """Calls a phase makes where the i-th call takes times[i % len(times)] ms (a target of 10 ms)."""
    clock = _FakeTime()

    def call(inputs: list) -> None:
        clock.now += times[call.count % len(times)] / 1e3
        call.count += 1

    call.count = 0
    phase = time_phase(
        call,
        lambda i: [],
        Clock(clock, None, None),
        lambda: None,
        "cpu",
        warmup_reps=0,
        min_reps=5,
        max_reps=10_000,
        target_phase_s=0.01,
        budget=budget,
    )
    return len(phase.times_ms)


def test_a_noisy_phase_goes_on_past_its_target_until_its_median_is_narrow_or_its_budget_is_spent() -> None:
    steady, noisy = [1.0, 1.001, 0.999], [0.5, 1.0, 1.5, 0.7, 1.3]
    at_target = _noisy_phase(steady, None)
    assert at_target in (10, 11)  # 10 ms of calls (float sums may need one more)
    assert _noisy_phase(steady, PhaseBudget(0.01, 1.0)) == at_target  # narrow already: no call more
    assert _noisy_phase(noisy, None) in (10, 11)  # no budget: the target alone
    calls = _noisy_phase(noisy, PhaseBudget(0.01, 1.0))
    assert 11 < calls < 1000  # narrow within 1 % before the 1 s budget
    assert _noisy_phase(noisy, PhaseBudget(0.0001, 0.05)) in (50, 51)  # never that narrow: the 50 ms budget


def test_median_interval_covers_the_median_and_narrows_with_repetitions() -> None:
    import random

    draw = random.Random(5)
    few = [draw.lognormvariate(0, 0.2) for _ in range(20)]
    many = few + [draw.lognormvariate(0, 0.2) for _ in range(980)]
    for times in (few, many):
        low, high = median_interval(times)
        assert low <= statistics.median(times) <= high
    assert median_interval(many)[1] - median_interval(many)[0] < (median_interval(few)[1] - median_interval(few)[0]) / 3
    assert median_interval([3.0, 1.0, 2.0]) == (1.0, 3.0)  # under 6: the whole range
    assert narrow_enough([1.0] * 6, 0.001) and not narrow_enough([1.0] * 5, 0.5)


def test_median_interval_holds_the_true_median_about_95_times_in_100() -> None:
    import random

    draw = random.Random(11)
    covered = 0
    for _ in range(400):
        times = [draw.expovariate(1.0) for _ in range(60)]  # heavy-tailed; the true median is ln 2
        low, high = median_interval(times)
        covered += low <= math.log(2) <= high
    assert 0.91 <= covered / 400 <= 0.99


def test_the_decision_interval_is_at_least_the_noise_floor() -> None:
    summary = {"median_ms": 1.0, "ci_ms": [0.99, 1.02]}
    assert decision_interval(summary, 0.03) == (0.97, 1.03)
    assert decision_interval(summary, 0.0) == (0.99, 1.02)
    assert decision_interval({"median_ms": 1.0}, 0.03) is None  # a baseline cached without one
    assert decision_interval(None, 0.03) is None


def test_requests_of_many_calls_make_the_outside_view_fine_enough_for_a_tiny_kernel() -> None:
    # r02 of round 11 (bench/results/cpu-2026-12-07-redteam-10/): a 0.06 ms relu whose process reports 1/50 of its
    # time, beside a per-request overhead of 1 ms that swings by 0.3 ms. One call a request: the claim hides in the
    # noise. 64 calls a request: the sum of the claims is bounded by the request's outside view, 64 times finer a call.
    from cuda_agent.judge.child.timing import external_bound

    overhead = [1.0, 1.3, 1.05, 1.2, 1.1, 1.0, 1.25, 1.15] * 2
    real, faked = 0.06, 0.06 / 50
    swings = [0.0, 0.3, 0.1, 0.2] * 5
    alone = external_bound([faked] * 20, [real + 1.0 + s for s in swings], overhead, "cpu")
    assert not alone["bound_applied"] and alone["median_ms"] == pytest.approx(faked)
    calls = 64
    per_request = [7.0 + o for o in overhead]  # a request's own costs grow with its calls, its swings much less
    external = [calls * real + 8.0 + s for s in swings]
    grouped = external_bound([calls * faked] * 20, external, per_request, "cpu", calls)
    assert grouped["bound_applied"] and grouped["median_ms"] >= 0.8 * real
    assert grouped["calls_per_request"] == calls and grouped["resolution_ms"] < real / 2
    honest = external_bound([calls * real] * 20, external, per_request, "cpu", calls)
    assert not honest["bound_applied"] and honest["median_ms"] == pytest.approx(real)


def test_calls_per_request_aim_at_a_resolution_of_a_share_of_eagers_call_within_memory_and_descriptors() -> None:
    from cuda_agent.judge.child.timing import RESOLUTION_SHARE, group_reps, group_size

    assert group_size(0.2, 10.0, 1 << 20, 1, "cpu", 256) == 1  # a call dwarfs the noise
    size = group_size(0.2, 0.045, 1 << 10, 1, "cuda", 256)
    assert size == 256 and 0.2 / size <= RESOLUTION_SHARE * 0.045  # the power of two at or above the need
    assert group_size(0.26, 0.045, 1 << 10, 1, "cuda", 16) == 16  # the configured cap
    assert group_size(0.26, 0.045, 1 << 20, 1, "cpu", 256) == 64  # 64 MiB of inputs and outputs a request
    assert group_size(0.26, 0.045, 1 << 10, 3, "cpu", 256) == 80  # 3 tensors a call, 240 descriptors a request
    assert group_size(0.26, 0.045, 1 << 10, 3, "cuda", 256) == 256  # CUDA's buffers are reused: no descriptors
    assert group_size(0.26, 0.045, 1 << 10, 1, "cuda", 256, outputs=8) == 128  # where 1024 outputs lie, an answer
    assert (group_reps(10, 1), group_reps(10, 64), group_reps(3, 64), group_reps(1000, 64)) == (10, 6, 3, 16)


def test_a_phase_in_groups_flushes_once_a_group_and_times_each_call_as_the_group_over_its_calls() -> None:
    clock = _FakeTime()
    seen: list[int] = []
    flushes = []

    def call(inputs: list) -> None:
        seen.append(inputs[0])
        clock.now += 0.001 if len(seen) % 4 == 1 else 0.0005  # the first call of a group is cold

    phase = time_phase(
        call,
        lambda i: [i],
        Clock(clock, None, None),
        lambda: flushes.append(len(seen)),
        "cpu",
        warmup_reps=3,
        min_reps=10,
        max_reps=6,
        target_phase_s=10.0,
        group=4,
    )
    assert seen == list(range(28))  # one warm-up group, then six timed groups, each call on inputs of its own
    assert flushes == [4, 8, 12, 16, 20, 24]  # before each timed group, not between its calls
    assert all(ms == pytest.approx((1.0 + 3 * 0.5) / 4) for ms in phase.times_ms)


def test_few_requests_are_held_to_a_quantile_of_the_calibration_that_few_honest_gaps_stay_below() -> None:
    # A phase of 6 requests of 64 calls: its least gap is the least of 6, which lies above the calibration's first
    # quartile one time in 6 for an honest solution (0.75 ** 6). Held to the quantile 1 - 0.001 ** (1/6) instead: no
    # false alarm; work hidden beyond the calibration's spread still shows.
    from cuda_agent.judge.child.timing import external_bound

    overhead = [20.0 + 0.5 * i for i in range(16)]  # 20 to 27.5 ms a request
    claimed = [64 * 0.04] * 6
    honest = [c + o for c, o in zip(claimed, [25.0, 26.5, 25.5, 27.0, 25.5, 27.5], strict=True)]  # all above q1
    phase = external_bound(claimed, honest, overhead, "cpu", 64)
    assert not phase["bound_applied"] and phase["median_ms"] == pytest.approx(0.04)
    hiding = [e + 12.0 for e in honest]  # 0.19 ms a call done outside its clock
    phase = external_bound(claimed, hiding, overhead, "cpu", 64)
    assert phase["bound_applied"] and phase["median_ms"] >= 0.04 + 0.15


def test_probes_among_the_timed_requests_move_a_calibration_made_on_a_busier_machine_down_never_up() -> None:
    # Round 13's b8: a clock stopped during forward on every request, after a calibration made while the machine was
    # busier (its least overhead 12 ms a request, the phase's 8): every gap lies below the calibration's least. The
    # zero model's requests among the timed ones say the overhead now.
    from cuda_agent.judge.child.timing import drift_corrected, external_bound

    overhead = [12.0, 12.2, 12.1, 13.0, 12.3, 13.5, 12.4, 12.0, 13.2, 12.2, 12.5, 12.9, 12.1, 12.3, 13.1, 12.6]
    real = 2.5
    swings = [0.0, 0.3, 0.1, 0.6, 0.2, 0.4] * 4
    external = [real + 8.0 + s for s in swings]
    stopped = external_bound([0.0] * 24, external, overhead, "cpu", 64)
    assert not stopped["bound_applied"]
    now, shift = drift_corrected(overhead, [8.1, 8.4, 8.0, 8.6, 8.2])
    assert shift == pytest.approx(4.0)
    caught = external_bound([0.0] * 24, external, now, "cpu", 64)
    assert caught["bound_applied"] and caught["median_ms"] >= 0.8 * real / 64
    honest = external_bound([real] * 24, external, now, "cpu", 64)
    assert not honest["bound_applied"] and honest["median_ms"] == pytest.approx(real / 64)
    # Probes slowed or under-reported by the candidate's process read higher: never taken. Too few: not taken.
    assert drift_corrected(overhead, [20.0, 21.0, 19.0]) == (overhead, 0.0)
    assert drift_corrected(overhead, [8.0, 8.1]) == (overhead, 0.0)
    # A calibration with a few slow requests keeps its least: its median is no measure of the overhead now.
    spiky = [8.0, 8.1, 20.0, 8.2, 25.0, 8.0, 22.0, 8.3, 24.0, 8.1, 21.0, 8.2, 23.0, 8.4, 26.0, 8.1]
    assert drift_corrected(spiky, [8.2, 8.5, 8.3, 9.0]) == (spiky, 0.0)


def test_a_speed_up_within_what_the_outside_view_could_not_see_is_a_tie() -> None:
    # Round 13's b7 on a loaded 2-core VM: a clock stopped during forward (claims 0.0045 ms a call against the work's
    # 0.03 and eager's 0.021) on 85 % of requests, honest on the others, so that the phase's least gap is an honest
    # one, beside a noisy calibration (twice its interquartile range, 9 ms a request of 64 calls). No reading sees
    # it; the reward's interval reaches above the claims by what the median reading could not see.
    from cuda_agent.judge.child.timing import decision_interval, external_bound
    from cuda_agent.reward import beats

    overhead = [7.5, 12.0, 8.0, 16.0, 7.8, 13.0, 9.0, 7.6, 15.0, 8.5, 7.7, 12.5, 10.0, 7.9, 14.0, 11.0]
    real, claim = 64 * 0.03, 64 * 0.0045
    honest_at = {3, 11, 19}
    claimed = [real if i in honest_at else claim for i in range(24)]
    external = [real + 8.0 + 0.3 * (i % 5) for i in range(24)]
    mixed = external_bound(claimed, external, overhead, "cpu", 64)
    assert not mixed["bound_applied"] and mixed["median_ms"] == pytest.approx(0.0045)
    low, high = decision_interval(mixed, 0.03)
    assert high >= 0.03 and not beats(mixed["median_ms"], 0.021, (low, high), (0.0205, 0.0215))
    # A quiet machine's calibration leaves a claim little room: 0.02 ms a call of a request of 64.
    quiet = [7.0 + 0.05 * i for i in range(16)]
    honest = external_bound([real] * 24, [real + 7.2 + 0.01 * i for i in range(24)], quiet, "cpu", 64)
    assert not honest["bound_applied"] and honest["unseen_ms"] < 0.025
    # Baselines (no claims of the candidate's process) keep their intervals.
    assert decision_interval({"median_ms": 1.0, "ci_ms": [0.99, 1.01]}, 0.03) == (0.97, 1.03)


def test_eager_is_not_timed_again_beside_a_thread_of_the_candidates_that_never_stopped() -> None:
    # uids.frozen's count of the candidate's threads still not stopped after its wait (tests/judge/test_uids.py).
    from cuda_agent.judge.child.calibration import refuse_running
    from cuda_agent.judge.child.stop import Stop

    refuse_running(0)
    with pytest.raises(Stop) as ended:
        refuse_running(2)
    result = ended.value.result
    assert result.status == "rejected" and [v.check for v in result.violations] == ["work_while_stopped"]
