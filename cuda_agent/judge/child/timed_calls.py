"""The candidate's timed phase, call by call: fresh inputs per call, and its outputs watched and judged (worker.py)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from cuda_agent.judge.child import guards
from cuda_agent.judge.child.stop import stop
from cuda_agent.types import Violation

if TYPE_CHECKING:
    from cuda_agent.judge.child.worker import CandidateRun

TIMED_CHECKS = 5
"""Timed calls (besides the last) whose outputs are judged, on average, among the phase's first min_reps: each is
judged with a chance of TIMED_CHECKS / min_reps, decided after it returned (a phase of few slow calls is where a
solution skipping the work on some calls moves the median most easily)."""


class TimedCalls:
    """The timed phase's calls (`CandidateRun.timing`) and the little kept between them.

    Red-team runs (2026-12-05) passed with reward 3 by storing a result and returning it again for inputs seen
    before (the same storage, or a copy keyed by the inputs' values), or by skipping the work on repeated inputs.
    So every call gets inputs of its own, drawn from get_inputs() under a seed of its own before the cache flush
    (a stored result is then wrong, a memo never hits); nothing is kept between calls but the last output (a call
    returning its storage again is `result_caching`); and outputs are judged like a trial's (label `timed`): the
    last call's on every element, and others drawn at random as they return (`TIMED_CHECKS`,
    `timing.late_check_chance`), screened at random positions first (`trial.screen_trial`: a call whose work was
    skipped is wrong almost everywhere), so a solution that works only on some calls is caught with a chance that
    grows with how many it skips. Nothing before or during a call tells it whether it will be judged: the decision
    is made after it returns, independently for each call, and the inputs to judge it on are drawn again from their
    seed (so in-place writes show) rather than copied beforehand. The bookkeeping runs after each call, outside the
    timed window: inside it, `call` only keeps references.
    """

    __slots__ = (
        "chance",
        "first_late",
        "first_timed",
        "judged_s",
        "latest",
        "latest_judged",
        "ours",
        "random",
        "returned",
        "run",
        "started",
    )
    """No instance attribute can shadow a method (a red-team solution set `calls.judge` to a no-op)."""

    def __init__(self, run: CandidateRun) -> None:
        import secrets

        self.run = run
        req = run.req
        self.random = secrets.SystemRandom()
        self.first_timed = req.warmup_reps
        self.first_late = req.warmup_reps + req.min_reps
        self.chance = min(1.0, TIMED_CHECKS / req.min_reps)
        """The chance that the call just returned is judged: TIMED_CHECKS / min_reps, then `late_check_chance`."""
        self.started = 0.0
        """When the first timed call's inputs were drawn (perf_counter)."""
        self.judged_s = 0.0
        """Seconds spent judging timed outputs: not part of the phase's budget (`spent`)."""
        self.latest: list[Any] = [None, None, -1, []]
        """The last call's inputs, its output, its index (warm-ups counted first) and its sample (`after_call`)."""
        self.returned: list[Any] = [None, None, -1]
        """What `call` leaves for `after_call`: the call's inputs, its output and its index."""
        self.latest_judged = False
        """Whether the last call's output was judged on every element as it returned (not passed by the screen)."""
        self.ours = False
        """Set while our own code runs inside the phase: its errors are not the candidate's (see `run`)."""

    def inputs_for(self, i: int) -> list[Any]:
        from cuda_agent.judge.child.inputs import make_inputs

        run = self.run
        self.latest[0] = None  # the call before was not the last: its inputs go before the next are made
        self.returned[2] = i
        if i == self.first_timed:
            self.started = time.perf_counter()
        self.ours = True
        inputs = make_inputs(run.problem, run.req.task_name, run.req.timing_seed + i, run.device)
        self.ours = False
        return inputs

    def call(self, inputs: list[Any]) -> None:
        try:
            with self.run.torch.no_grad():
                self.returned[0], self.returned[1] = inputs, self.run.candidate(*inputs)
        except Exception as exc:  # a Stop of ours among them: raised by its code, it would say what the run found
            message = f"ModelNew.forward raised while timed: {type(exc).__name__}: {exc}"
            raise stop("runtime_error", "timing", message, cause=exc) from None

    def after_call(self) -> None:
        from cuda_agent.judge.child.timing import late_check_chance
        from cuda_agent.judge.child.trial import sample_outputs

        inputs, out, index = self.returned
        # Before the judge allocates anything: an allocator of the candidate's would run its code in our allocations.
        violations = self.run.allocator_violations() + self.run.hook_violations() + self.run.thread_violations()
        if violations:
            raise stop("rejected", "timing", violations[0].message, violations)
        out = self.run.plain(out, "timing")  # nothing of ours reads the object forward returned
        # First, before anything of ours lets an earlier output go: what this call's output holds as it returned.
        self.ours = True
        sample = sample_outputs(self.run, out, self.random.getrandbits(63)) if index >= self.first_timed else []
        self.ours = False
        self.returned[0] = self.returned[1] = None
        if self.latest[1] is not None and guards.same_storage(self.latest[1], out, inputs):
            message = "forward returned the storage of its previous output (a stored result)"
            raise stop("rejected", "timing", message, [Violation(check="result_caching", message=message)])
        self.still_written(self.latest[3])  # the call before's output, until now: a thread that wrote it late
        self.latest[:] = [inputs, out, index, sample]  # lets the call before's output go: what that sets off, runs
        self.still_written(sample)
        picked = index >= self.first_timed and self.random.random() < self.chance
        self.latest_judged = picked and self.judge(inputs, out, index, screen=True)
        if index == self.first_late - 1:  # later calls: a chance from the pace of the first min_reps
            req = self.run.req
            self.chance = late_check_chance(self.spent(), req.min_reps, req.max_reps, req.target_phase_s)
        self.run.tick()

    def spent(self) -> float:
        """The seconds of the phase's budget used: its wall time since the first timed call's draw, less the judging
        of outputs (`timing.time_phase`'s `spent`)."""
        return time.perf_counter() - self.started - self.judged_s

    def still_written(self, sample: list[Any]) -> None:
        """A timed output changed since it returned (`trial.sample_outputs`): the call left work running."""
        from cuda_agent.judge.child.trial import changed_since

        self.ours = True
        changed = bool(sample) and changed_since(self.run, sample)
        self.ours = False
        if changed:
            message = "a timed call's output changed after forward returned (work left running past the clock)"
            raise stop("rejected", "timing", message, [Violation(check="late_output_write", message=message)])

    def check_last(self) -> None:
        """Judge the last call's output on every element, unless it was as it returned; nothing is kept after."""
        inputs, out, index, sample = self.latest
        self.latest[:] = [None, None, -1, []]
        self.still_written(sample)
        if not self.latest_judged:
            self.judge(inputs, out, index)

    def judge(self, given: list[Any], out: Any, index: int, screen: bool = False) -> bool:
        """Judge a timed output: screened at random positions first where `screen` (the outputs drawn at random as
        they returned), in full otherwise (the last call's: one timed output is always judged on every element).
        Returns whether it was judged on every element."""
        from cuda_agent.judge.child.inputs import make_inputs

        run = self.run
        start = time.perf_counter()
        run.check_state("timing", judging=True)  # a function patched by the call just made would judge it
        self.ours = True
        drawn = make_inputs(run.problem, run.req.task_name, run.req.timing_seed + index, run.device)
        full = run.check_timed_output(drawn, given, out, index, self.random.getrandbits(63) if screen else None)
        self.ours = False
        self.judged_s += time.perf_counter() - start
        return full
