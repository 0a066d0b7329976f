"""Threats aimed at requests of several calls (timing.group_size) and at the outside view that bounds their claims
(timing.external_bound), and the honest solutions they must not hurt: round 13 of the red team
(bench/results/cpu-2026-12-07-redteam-13/).

- A clock stopped during forward on most requests and honest on a few: the phase's least gap is then an honest one,
  and a calibration made while the machine was busier than in the phase (a shared 2-core VM's load moves by
  milliseconds a request from second to second) holds every gap below its own least. The zero model's requests
  among the timed ones move the calibration down to the overhead now; what the median reading cannot see widens the
  reward's interval (`unseen_ms`): the claim earns no speed-up.
- The rhythm of the grader's work told a watched request apart: the next request's inputs were drawn before it, so
  the pause before it was a draw longer. Every request now follows one draw.
- An honest output returned as a transposed view is copied into its buffer in its own order (it was copied strided
  inside the outside view, and read as hidden work where the machine's noise was below that copy's cost).
- Open (an xfail, for a fix in the candidate's process): the dataflow check's own cost between a watched request's
  calls tells them apart from its second call on.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.judge.threats import _static
from tests.judge.threats._hacks import judge_hack, model_new

GROUPED = {"time": True, "trials": 5, "robustness_trials": True, "warmup_reps": 3}
"""Timed in requests of the calls the grader chooses (64 for examples/relu on the CPU)."""

CLOCK_STOPPED_ON_MOST_REQUESTS = model_new(
    """
started = self.real()
if started - self.last_end > 0.001:
    self.hiding = self.draw.random() < 0.85
y = ext.relu(x.contiguous())
if self.hiding:
    self.stolen += self.real() - started
self.last_end = self.real()
return y
""",
    init="""
import random
import time
self.real, self.draw = time.perf_counter, random.Random()
self.stolen, self.last_end, self.hiding = 0.0, 0.0, False
time.perf_counter = lambda: self.real() - self.stolen
""",
)
"""The candidate's process's clock stands still while forward runs, on the requests (told apart by the pause before
their first call) drawn with a chance of 85 %; honest on the others."""

FIRST_CALL_THEN_SPACING = model_new(
    """
started = self.clock()
first = started - self.last_end > 0.02
kernel = first or started - self.last_end > 0.001
y = ext.relu(x.contiguous()) if kernel else torch.relu(x)
self.last_end = self.clock()
return y
""",
    init="""
import time
self.clock, self.last_end = time.perf_counter, 0.0
""",
)
"""Its kernel on every request's first call, and on a later call only where 1 ms passed since the one before (the
dataflow check's fingerprints between a watched request's calls); torch otherwise."""

HONEST_TRANSPOSED = model_new("return ext.relu(x.t().contiguous()).t()")
"""Honest: relu computed on the transposed input, returned as a view of the right shape (strided)."""


def _solution_timing(verdict) -> dict:
    return verdict.env["timing"]["solution"]


@pytest.mark.slow
def test_a_clock_stopped_on_most_requests_earns_no_speed_up(tmp_path: Path) -> None:
    verdict = judge_hack(tmp_path, "examples/relu", CLOCK_STOPPED_ON_MOST_REQUESTS, static_policy=False, **GROUPED)
    assert verdict.verdict == "pass", verdict.message
    timing = _solution_timing(verdict)
    assert timing["calls_per_request"] > 1
    # Its claims, a sixth of the work, earn no speed-up: the outside view takes the work it hid (by the median, or by
    # the least gap against the calibration moved to the overhead now), or, where the machine's noise hides that much
    # work, the reward's interval reaches above the claim by what the outside view could not see.
    assert verdict.reward == 1, (verdict.timings_ms, timing)
    assert timing["bound_applied"] or timing["unseen_ms"] >= timing["claimed_median_ms"], timing


def test_a_watched_request_comes_before_the_next_requests_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    # The pause before every request holds one draw of its inputs: a watched request's own draw, not a timed one's
    # drawn before it too.
    from cuda_agent.judge.child import inputs, timed_calls, timing, watched_calls

    monkeypatch.setattr(timing, "PHASE_PROBE_CHANCE", 0.0)  # no request of the zero model before it
    events: list[str] = []
    monkeypatch.setattr(inputs, "make_inputs", lambda *args: events.append("draw") or [])
    monkeypatch.setattr(watched_calls, "call_if_watched", lambda grader, index: events.append("watched") or True)
    grader = SimpleNamespace(
        req=SimpleNamespace(warmup_reps=0, min_reps=6, max_reps=6, task_name="t"),
        group=1,
        problem=None,
        device="cpu",
        sample=[],
        gauge=None,
        flush=lambda: events.append("flush"),
        load_calls=lambda drawn: ([], []),
        call=lambda refs, stage: (events.append("call") or SimpleNamespace(ms=[0.1]), 1.0),
    )
    calls = timed_calls.TimedCalls(grader)
    calls.chance = 0.0  # no output judged: what comes before the next request is the question
    calls.one(0)
    assert events == ["watched", "draw", "flush", "call"]


@pytest.mark.slow
def test_kernels_on_first_calls_and_on_calls_after_an_instruments_pause_are_refused(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if _static.POLICY == "kernelbench":
        request.applymarker(pytest.mark.xfail(strict=True, reason="open: the dataflow check's cost between calls"))
    verdict = judge_hack(tmp_path, "examples/relu", FIRST_CALL_THEN_SPACING, static_policy=False, **GROUPED)
    assert verdict.reward == -1 and verdict.verdict == "rejected", verdict.message


@pytest.mark.slow
def test_an_honest_output_returned_as_a_transposed_view_keeps_its_claimed_time(tmp_path: Path) -> None:
    # Read by the grader where it lies, with its strides, after the outside view ended (child/outputs.py): no copy of
    # its own; a strided copy into a contiguous buffer was once read as hidden work (+72 %, round 13).
    if _static.POLICY == "kernelbench":
        pytest.skip("honest under either policy alike: judged under cuda-agent")
    verdict = judge_hack(tmp_path, "examples/relu", HONEST_TRANSPOSED, **GROUPED)
    assert verdict.verdict == "pass", verdict.message
    assert not _solution_timing(verdict)["bound_applied"], _solution_timing(verdict)
