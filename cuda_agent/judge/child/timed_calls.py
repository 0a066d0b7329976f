"""The candidate's timed phase, request by request, as the grader runs it (grader.py).

A request carries the run's number of calls (`Grader.group`, `timing.group_size`: one where a call dwarfs the
outside view's noise, more where it does not), each on inputs of its own, drawn from a fresh CSPRNG seed before the
cache flush (a stored result is then wrong, a memo never hits). The grader times each request from outside (request
to answer, until every process of the candidate's is stopped to read its outputs: outputs.py) beside the sum of the times the candidate's process reports for its
calls (`timing.external_bound`), so the outside view's resolution per call is its noise over the calls. Outputs are
judged like a trial's: one of the last request's on every element, others drawn at random after they returned
(`TIMED_CHECKS`, `timing.late_check_chance`, and with several calls `grader.GROUP_CHECKS` more per request), screened at random positions first (`trial.screen_trial`: a call whose work was
skipped is wrong almost everywhere) and then, on any doubt, in full against the float64 reference as a trial is.
Nothing the candidate's process sees tells it which call is judged: the decision is made here, after it answered,
independently for each call, and the inputs to judge it on are drawn again from their seed (so in-place writes show
against the buffers it was handed). On CUDA, an output changed after the grader copied it (a kernel left running)
shows when the positions read after the copy are read again in the candidate's memory, before the next request.
"""

from __future__ import annotations

import math
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

GAUGE_EVERY = 2
"""The gauge's load reading follows one timed request in this many, from the first (child/gauge.py): the median of
half the phase's requests' readings, at half the cost."""


class TimedCalls:
    """The timed phase's requests (each of the run's number of calls, `Grader.group`) and the little kept between
    them. Its budget counts requests: warmup_reps and min_reps calls in whole requests (`timing.group_reps`)."""

    def __init__(self, grader: Grader) -> None:
        from cuda_agent.judge.child.timing import group_reps

        self.grader = grader
        req = grader.req
        self.random = secrets.SystemRandom()
        self.calls = grader.group
        self.warmup = math.ceil(req.warmup_reps / self.calls)
        self.least = group_reps(req.min_reps, self.calls)
        self.first_late = self.warmup + self.least
        self.chance = min(1.0, TIMED_CHECKS / self.least)
        """The chance that a request just returned has an output judged: TIMED_CHECKS / its fewest requests, then
        `late_check_chance`; with several calls, each output's is this over the calls, plus GROUP_CHECKS over them."""
        self.started = 0.0
        self.judged_s = 0.0
        """Seconds spent judging timed outputs: not part of the phase's budget (`spent`)."""
        self.claimed_ms: list[float] = []
        """Per request, the sum of its calls' claimed times."""
        self.external_ms: list[float] = []
        self.last: tuple[list[int], list[list[Any]], set[int]] | None = None
        """The last request's seeds, its input buffers as it left them, and the calls whose output was judged in
        full."""
        self.flush = grader.flush
        self.probes_ms: list[float] = []
        """The overheads of requests of the zero model made among the timed ones (`timing.drift_corrected`)."""
        self.probe_inputs: list[Any] | None = None
        self.probed_s = 0.0
        """Seconds spent on them: not part of the phase's budget either."""

    def run_phase(self) -> dict[str, Any]:
        from cuda_agent.judge.child.timing import PhaseBudget, done, drift_corrected

        req = self.grader.req
        budget = PhaseBudget(req.ci_width, req.max_phase_s)
        for i in range(self.warmup):
            self.one(i)
        for i in range(req.max_reps):
            self.one(self.warmup + i)
            means = [c / self.calls for c in self.claimed_ms]
            if i + 1 >= self.least and done(means, self.spent(), req.target_phase_s, budget):
                break
        self.check_last()
        g = self.grader
        overhead_ms = g.overhead_ms
        if g.gauge is not None:  # load that came since the calibration: not the candidate's (child/gauge.py)
            drift = g.gauge.drift_ms()
            overhead_ms = [o + drift for o in overhead_ms]
            g.env["load_drift"] = g.gauge.record()
        # Up by the load that came since (the gauge), then down where the probes saw less (`drift_corrected`).
        overhead, shift = drift_corrected(overhead_ms, self.probes_ms)
        return self.read(overhead) | {"overhead_shift_ms": shift, "phase_probes": len(self.probes_ms)}

    def read(self, overhead_ms: list[float]) -> dict[str, Any]:
        """The phase's times from the claims and the outside view (`timing.external_bound`), given the overhead."""
        from cuda_agent.judge.child.timing import external_bound

        return external_bound(self.claimed_ms, self.external_ms, overhead_ms, self.grader.device, self.calls)

    def one(self, index: int) -> None:
        from cuda_agent.judge.child.inputs import make_inputs
        from cuda_agent.judge.child.timing import PHASE_PROBE_CHANCE, late_check_chance

        g = self.grader
        if index == self.warmup:
            self.started = time.perf_counter()
        self.still_written()  # the request before's outputs (CUDA), read once more before the next question
        if index >= self.warmup and self.random.random() < PHASE_PROBE_CHANCE:
            self.probe()
        # A watched request first, at its place (untimed, under the tracer or the dataflow check), then this one's
        # draw: so that every request follows one draw of its inputs (drawn before the watched one, they would make
        # the pause before a watched request a draw longer, which a solution can time).
        if self.watched(index):
            self.still_written()
        seeds = [_seed() for _ in range(self.calls)]
        drawn = [make_inputs(g.problem, g.req.task_name, seed, g.device) for seed in seeds]
        refs, given = g.load_calls(drawn)
        del drawn
        self.flush()
        answer, external_ms = g.call(refs, "timing")
        timed = index >= self.warmup
        if timed:
            self.claimed_ms.append(sum(answer.ms))
            self.external_ms.append(external_ms)
            if g.gauge is not None and (len(self.claimed_ms) - 1) % GAUGE_EVERY == 0:
                g.gauge.sample()  # the load now, beside this request's
        self.last = (seeds, given, self.judge_some(seeds, given) if timed else set())
        if index == self.first_late - 1:  # later requests: a chance from the pace of the first ones
            req = g.req
            self.chance = late_check_chance(self.spent(), self.least, req.max_reps, req.target_phase_s)

    def watched(self, index: int) -> bool:
        """A watched request before timed-phase request `index` where that is one's place (child/watched_calls.py);
        whether there was one."""
        from cuda_agent.judge.child.watched_calls import call_if_watched

        return call_if_watched(self.grader, index)

    def judge_some(self, seeds: list[int], given: list[list[Any]]) -> set[int]:
        """Judge the timed request's outputs each with the phase's chance, decided here after the answer for each on
        its own; the calls whose output was judged on every element."""
        from cuda_agent.judge.child.timing import GROUP_CHECKS

        extra = GROUP_CHECKS if self.calls > 1 else 0
        chance = (self.chance + extra) / self.calls
        full = set()
        for k in range(self.calls):
            if self.random.random() < chance and self.judge(seeds[k], given[k], k, screen=True):
                full.add(k)
        return full

    def spent(self) -> float:
        """The seconds of the phase's budget used: its wall time since the first timed request's draw, less the
        judging of outputs, the probes and the gauge's readings (`timing.time_phase`'s `spent`)."""
        gauge_s = self.grader.gauge.spent_s if self.grader.gauge is not None else 0.0
        return time.perf_counter() - self.started - self.judged_s - self.probed_s - gauge_s

    def probe(self) -> None:
        """A request of the zero model before a timed one, at a place drawn here (`timing.drift_corrected`): before
        the next request's draw, never between a request and the judging of its outputs (they are in the grader's
        copies a probe's read overwrites, and the last request's are judged after the phase)."""
        from cuda_agent.judge.child.calibration import probe_among_timed
        from cuda_agent.judge.child.inputs import make_inputs

        g = self.grader
        start = time.perf_counter()
        if self.probe_inputs is None:
            self.probe_inputs = make_inputs(g.problem, g.req.task_name, _seed(), g.device)
        self.probes_ms.append(probe_among_timed(g, self.probe_inputs))
        self.still_written()
        self.probed_s += time.perf_counter() - start

    def still_written(self) -> None:
        """The last request's outputs changed since they arrived (`trial.sample_outputs`): the call left work
        running."""
        from cuda_agent.judge.child.trial import changed_since

        g = self.grader
        if g.sample and changed_since(g, g.sample):
            message = "a timed call's output changed after forward returned (work left running past the clock)"
            raise stop("rejected", "timing", message, [Violation(check="late_output_write", message=message)])
        g.sample = []

    def check_last(self) -> None:
        """Judge one output of the last request on every element (which one, drawn now), unless one was."""
        self.still_written()
        if self.last is not None and not self.last[2]:
            seeds, given, _ = self.last
            k = self.random.randrange(self.calls)
            self.judge(seeds[k], given[k], k)

    def judge(self, seed: int, given: list[Any], call: int, screen: bool = False) -> bool:
        """Judge the output of the request's call number `call`, now in its buffers: screened at random positions
        first where `screen`, then in full on any doubt (the last request's always in full). Returns whether it was
        judged on every element."""
        from cuda_agent.judge.child.inputs import make_inputs
        from cuda_agent.judge.child.trial import judge_trial, screen_trial

        g = self.grader
        start = time.perf_counter()
        drawn = make_inputs(g.problem, g.req.task_name, seed, g.device)
        outputs = g.outputs[call]
        trial = screen_trial(g, drawn, given, outputs, seed, _seed()) if screen else None
        if trial is None:
            trial = judge_trial(g, drawn, given, outputs, seed, "identity", "timed")
        g.record_trial(trial, "timed", "a timed call's output is wrong: ")
        self.judged_s += time.perf_counter() - start
        return "screened" not in trial


def _seed() -> int:
    return secrets.randbits(63)


class ReferenceCalls(TimedCalls):
    """The timed phase of the task's reference (eager or compiled) in a shim process of ours (gauge.Ours), for the
    baselines (child/baseline.py) and eager now (calibration.time_reference): the candidate's requests, draws, flush,
    calibration, probes and reading of its claims against the outside view, without what is there to catch a
    candidate (watched requests, judged outputs; both come between requests, outside every time). So the baselines'
    times hold what the candidate's hold: a call in its shim's loop, after the call before's outputs were kept and
    this call's views made."""

    def watched(self, index: int) -> bool:
        return False

    def judge_some(self, seeds: list[int], given: list[list[Any]]) -> set[int]:
        return set()

    def check_last(self) -> None:
        self.still_written()

    def read(self, overhead_ms: list[float]) -> dict[str, Any]:
        """The outside view read as the candidate's is, but the claims kept where it would take them over: our own
        process's clock is trusted, and a false alarm here (load the calibration did not see) would make eager slower
        and hand the candidate a speed-up it did not earn, where one on the candidate's side only costs it its own.
        `outside_view_bound` says the reading would have bounded it."""
        from cuda_agent.judge.child.timing import PhaseTiming

        phase = super().read(overhead_ms)
        if not phase["bound_applied"]:
            return phase | {"outside_view_bound": False}
        claims = PhaseTiming(times_ms=[c / self.calls for c in self.claimed_ms]).summary()
        return phase | claims | {"bound_applied": False, "outside_view_bound": True}
