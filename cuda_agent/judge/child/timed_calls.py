"""The candidate's timed phase, call by call, as the grader runs it (grader.py).

Every call gets inputs of its own, drawn from a fresh CSPRNG seed before the cache flush (a stored result is then
wrong, a memo never hits). The grader times each call from outside (request to answer, the outputs read as they
arrived) beside the time the candidate's process reports (`timing.external_bound`). Outputs are judged like a
trial's: the last call's on every element, others drawn at random after they returned (`TIMED_CHECKS`,
`timing.late_check_chance`), screened at random positions first (`trial.screen_trial`: a call whose work was
skipped is wrong almost everywhere) and then, on any doubt, in full against the float64 reference as a trial is.
Nothing the candidate's process sees tells it which call is judged: the decision is made here, after it answered,
independently for each call, and the inputs to judge it on are drawn again from their seed (so in-place writes show
against the buffers it was handed). An output changed after its call answered (work left running) shows when the
positions read as it arrived are read again, before the next call overwrites it.
"""

from __future__ import annotations

import secrets
import time
from typing import TYPE_CHECKING, Any

from cuda_agent.judge.child.stop import stop
from cuda_agent.types import Violation

if TYPE_CHECKING:
    from cuda_agent.judge.child.grader import Grader

TIMED_CHECKS = 5
"""Timed calls (besides the last) whose outputs are judged, on average, among the phase's first min_reps: each is
judged with a chance of TIMED_CHECKS / min_reps, decided after it returned (a phase of few slow calls is where a
solution skipping the work on some calls moves the median most easily)."""


class TimedCalls:
    """The timed phase's calls and the little kept between them."""

    def __init__(self, grader: Grader) -> None:
        self.grader = grader
        req = grader.req
        self.random = secrets.SystemRandom()
        self.first_timed = req.warmup_reps
        self.first_late = req.warmup_reps + req.min_reps
        self.chance = min(1.0, TIMED_CHECKS / req.min_reps)
        """The chance that the call just returned is judged: TIMED_CHECKS / min_reps, then `late_check_chance`."""
        self.started = 0.0
        self.judged_s = 0.0
        """Seconds spent judging timed outputs: not part of the phase's budget (`spent`)."""
        self.claimed_ms: list[float] = []
        self.external_ms: list[float] = []
        self.last: tuple[int, list[Any], bool] | None = None
        """The last call's seed, the input buffers as it left them, and whether its output was judged in full."""
        self.flush = grader.flush

    def run_phase(self) -> dict[str, Any]:
        from cuda_agent.judge.child.timing import PhaseBudget, done, external_bound

        req = self.grader.req
        budget = PhaseBudget(req.ci_width, req.max_phase_s)
        for i in range(req.warmup_reps):
            self.one(i)
        for i in range(req.max_reps):
            self.one(req.warmup_reps + i)
            if i + 1 >= req.min_reps and done(self.claimed_ms, self.spent(), req.target_phase_s, budget):
                break
        self.check_last()
        return external_bound(self.claimed_ms, self.external_ms, self.grader.overhead_ms, self.grader.device)

    def one(self, index: int) -> None:
        from cuda_agent.judge.child.inputs import make_inputs
        from cuda_agent.judge.child.timing import late_check_chance
        from cuda_agent.judge.child.watched_calls import call_if_watched

        g = self.grader
        if index == self.first_timed:
            self.started = time.perf_counter()
        self.still_written()  # the call before's output, read once more before the next call's overwrites it
        if call_if_watched(g, index):  # an untimed call under the tracer or the dataflow check first, at its place
            self.still_written()
        seed = _seed()
        inputs = make_inputs(g.problem, g.req.task_name, seed, g.device)
        refs, given = g.exchange.load(inputs)
        del inputs
        self.flush()
        answer, external_ms = g.call(refs, "timing")
        timed = index >= self.first_timed
        if timed:
            self.claimed_ms.append(answer.ms or 0.0)
            self.external_ms.append(external_ms)
        picked = timed and self.random.random() < self.chance
        judged = picked and self.judge(seed, given, screen=True)
        self.last = (seed, given, judged)
        if index == self.first_late - 1:  # later calls: a chance from the pace of the first min_reps
            req = g.req
            self.chance = late_check_chance(self.spent(), req.min_reps, req.max_reps, req.target_phase_s)

    def spent(self) -> float:
        """The seconds of the phase's budget used: its wall time since the first timed call's draw, less the judging
        of outputs (`timing.time_phase`'s `spent`)."""
        return time.perf_counter() - self.started - self.judged_s

    def still_written(self) -> None:
        """The last call's output changed since it arrived (`trial.sample_outputs`): the call left work running."""
        from cuda_agent.judge.child.trial import changed_since

        g = self.grader
        if g.sample and changed_since(g, g.sample):
            message = "a timed call's output changed after forward returned (work left running past the clock)"
            raise stop("rejected", "timing", message, [Violation(check="late_output_write", message=message)])
        g.sample = []

    def check_last(self) -> None:
        """Judge the last call's output on every element, unless it was as it returned."""
        self.still_written()
        if self.last is not None and not self.last[2]:
            self.judge(self.last[0], self.last[1])

    def judge(self, seed: int, given: list[Any], screen: bool = False) -> bool:
        """Judge the output now in the buffers: screened at random positions first where `screen`, then in full on
        any doubt (the last call's always in full). Returns whether it was judged on every element."""
        from cuda_agent.judge.child.inputs import make_inputs
        from cuda_agent.judge.child.trial import judge_trial, screen_trial

        g = self.grader
        start = time.perf_counter()
        drawn = make_inputs(g.problem, g.req.task_name, seed, g.device)
        trial = screen_trial(g, drawn, given, g.outputs, seed, _seed()) if screen else None
        if trial is None:
            trial = judge_trial(g, drawn, given, g.outputs, seed, "identity", "timed")
        g.record_trial(trial, "timed", "a timed call's output is wrong: ")
        self.judged_s += time.perf_counter() - start
        return "screened" not in trial


def _seed() -> int:
    return secrets.randbits(63)
