"""The machine's load as the timed phase runs, seen by a process of ours shaped as the candidate's: the drift of a
request's overhead since the calibration, so that load that came later is not read as work the candidate hid.

The outside view's bound (`timing.external_bound`) holds the candidate's requests to the overhead calibrated on its
process before its code loaded. Load that rises after that (another judgement, a build) lengthens every request's
gap alike, and an honest solution's time would become the outside view's (figures in DESIGN.md). The gauge is a
second shim process, started as a timed run begins (grader.run), which never loads candidate code: it is calibrated
beside the candidate's process (`calibrate_beside`: their requests interleaved), and after every other timed request
(timed_calls.GAUGE_EVERY) it makes one request of as many calls of the zero model (`sample`). The median of those
less the median of its calibration, where it rose, else the fall of their least (`drift`), is added to the
candidate's calibration: load that came later is not read as hidden work, and load that went is not room to hide.

While the gauge's request runs, every process of the candidate's is stopped (`held_still`): it cannot load the
machine only while the gauge is measured, which would widen the bound by what it spins and let it hide as much.
Confined, that is every process of its user; unconfined, every process below the grader but ours, the grader
being the reaper of every orphan below it (`uids.adopt_orphans`), so that a process the candidate's starts in a
session of its own and leaves is still found there.
"""

from __future__ import annotations

import contextlib
import copy
import os
import signal
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cuda_agent.judge.child.grader import Grader
from cuda_agent.judge.child.stop import Stop
from cuda_agent.judge.protocol import LoadAnswer, ReferenceQuestion, RunRequest, RunResult

if TYPE_CHECKING:
    from cuda_agent.judge.child.exchange import Channel
    from cuda_agent.judge.standby import Standby


class OursFailed(RuntimeError):
    """A request of a process of ours ended as a candidate's would (`result`): our failure, never a verdict."""

    def __init__(self, result: RunResult) -> None:
        super().__init__(f"the judge's own shim process: {result.status}: {result.message}")
        self.result = result


class Ours(Grader):
    """A shim process of ours, driven as the candidate's is: it runs no candidate code, so whatever ends one of its
    requests (an exception, an answer out of shape) is our failure (`OursFailed`), never the candidate's verdict.
    The gauge's process, and the one the baselines are timed through (`use_reference`)."""

    def __init__(self, request: RunRequest, started: tuple[Standby, Channel] | None = None) -> None:
        """`started`: its process, started earlier (`grader.start_shim(namespace=False)`) to import while we work."""
        from cuda_agent.judge.child.grader import SHIM_STARTUP_S, start_shim
        from cuda_agent.judge.child.shim import DEVICE_ENV

        shim, channel = started or start_shim(namespace=False)
        super().__init__(request, shim, channel)
        self.folder = tempfile.TemporaryDirectory(prefix="cuda-agent-ours-")
        why_not = shim.wait_ready(SHIM_STARTUP_S)
        if why_not:
            self.close()
            raise RuntimeError(f"{why_not} (the judge's own shim process)")
        env = {"HOME": self.folder.name, "TMPDIR": self.folder.name, DEVICE_ENV: request.device}
        shim.go([], Path(self.folder.name), env, None)
        self.compiled = False
        """Whether the process calls the reference under torch.compile now (`use_reference`)."""
        self.trusted = True

    def call(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().call(*args, **kwargs)
        except Stop as ended:
            raise OursFailed(ended.result) from None

    def custom_work(self) -> float | None:
        """The profiled call (`Grader.custom_work`): its kernel times in `kernel_claim`, on CUDA the baselines'."""
        try:
            return super().custom_work()
        except Stop as ended:
            raise OursFailed(ended.result) from None

    def use_reference(self, compiled: bool = False, compile_mode: str | None = None) -> str | None:
        """Have the process call the task's reference from now on, eager or under torch.compile (`Shim.reference`);
        the error of a compile that failed (the call that compiles is the first after it), else None."""
        question = ReferenceQuestion(
            task_code=self.req.task_code, task_name=self.req.task_name, compiled=compiled, compile_mode=compile_mode
        )
        answer: LoadAnswer = self.answer_of(LoadAnswer, self.ask(question, stage="reference"), "reference")
        self.compiled = compiled
        return None if answer.status == "ok" else answer.message

    def close(self) -> None:
        self.exchange.close()
        self.close_reading()
        self.channel.close()
        self.shim.close()
        self.folder.cleanup()


class Gauge:
    """A process of ours answering requests of the zero model (`Grader.call` with `probe`), as the candidate's did
    before its code loaded."""

    def __init__(self, grader: Grader, started: tuple[Standby, Channel] | None = None) -> None:
        self.grader = grader
        self.ours = Ours(grader.req, started)
        if grader.req.confine_user is None:  # unconfined: what the candidate leaves behind stays below us, to stop
            from cuda_agent.judge.uids import adopt_orphans

            adopt_orphans()
        self.inputs: list[Any] = []
        """One call's inputs, as the candidate's calibration used them (`calibrate_beside`)."""
        self.calibrated_ms: list[float] = []
        self.seen_ms: list[float] = []
        self.spent_s = 0.0
        """Seconds the phase spent on the gauge: not part of its budget (timed_calls.TimedCalls.spent)."""

    def calibrate_beside(self, inputs: list[Any]) -> list[float]:
        """The candidate's process's overheads for requests of the run's number of calls (`calibration.overheads`),
        each request followed by one of the gauge's with the same `inputs`, whose overheads are the drift's zero."""
        from cuda_agent.judge.child.calibration import overheads

        g, ours = self.grader, self.ours
        ours.output_specs, ours.flush, ours.group = g.output_specs, g.flush, g.group
        self.inputs = inputs
        candidate_ms = overheads(g, inputs, g.group, beside=ours)
        self.calibrated_ms = ours.overhead_ms
        return candidate_ms

    def sample(self) -> None:
        """One request of the run's number of calls, after the flush, with the candidate's processes stopped."""
        from cuda_agent.judge.child.calibration import probe

        start = time.perf_counter()
        with held_still(self.grader) as running:
            if running:  # as while eager is timed again (calibration.time_reference)
                raise work_while_stopped(running)
            self.seen_ms.append(probe(self.ours, self.inputs, self.ours.group))
        self.spent_s += time.perf_counter() - start

    def beside(self, grader: Grader) -> Gauge:
        """The same process of ours as the gauge of another process's timed phase (eager now's:
        calibration.time_reference), with readings of its own, from its own calibration beside it."""
        other = copy.copy(self)
        other.grader, other.inputs, other.calibrated_ms = grader, [], []
        other.new_phase()
        return other

    def new_phase(self) -> None:
        """Readings from here on are another timed phase's (the baselines time two through one process of ours)."""
        self.seen_ms, self.spent_s = [], 0.0

    def drift_ms(self) -> float:
        return drift(self.calibrated_ms, self.seen_ms)

    def record(self) -> dict[str, float]:
        return {
            "gauge_calibrated_ms": statistics.median(self.calibrated_ms) if self.calibrated_ms else 0.0,
            "gauge_seen_ms": statistics.median(self.seen_ms) if self.seen_ms else 0.0,
            "gauge_least_calibrated_ms": min(self.calibrated_ms, default=0.0),
            "gauge_least_seen_ms": min(self.seen_ms, default=0.0),
            "drift_ms": self.drift_ms(),
        }

    def close(self) -> None:
        self.ours.close()


GAUGE_LEAST = 3
"""Readings of the gauge below which a fall of its least is not taken (`drift`)."""


def work_while_stopped(running: int) -> Stop:
    """The candidate's `rejected`: threads of its processes still not stopped after the wait (in a system call the
    kernel works on for them). Dropping the reading instead let a solution that keeps a thread so through every
    reading leave the gauge with none, and the calibration where a busier machine made it (`drift`)."""
    from cuda_agent.judge.child.stop import stop
    from cuda_agent.types import Violation

    message = f"{running} threads of your process kept running while it was stopped, between calls"
    return stop("rejected", "timing", message, [Violation(check="work_while_stopped", message=message)])


def drift(calibrated_ms: list[float], seen_ms: list[float]) -> float:
    """How much longer the gauge's requests take now than at its calibration: where the median rose, by as much;
    where it did not, the fall of the least (negative, from GAUGE_LEAST readings on), which moves the candidate's
    calibration down as the probes among the timed requests do (`timing.drift_corrected`), but read in a process of
    ours with the candidate's stopped: the probes run in its process, which tells them apart (`CallQuestion.probe`)
    and can slow them, so that a calibration made while the machine was busier held every gap of the phase below it.
    The least, not the median: a calibration with a few slow requests has a high median and a true least."""
    if not calibrated_ms or not seen_ms:
        return 0.0
    rise = statistics.median(seen_ms) - statistics.median(calibrated_ms)
    if rise > 0.0:
        return rise
    if len(seen_ms) < GAUGE_LEAST:
        return 0.0
    return min(0.0, min(seen_ms) - min(calibrated_ms))


@contextlib.contextmanager
def held_still(grader: Grader) -> Iterator[int]:
    """The process `grader` times stopped while the block runs. The candidate's: every process of its confinement's
    user (uids.frozen), or, unconfined, every process below this one (the grader, `uids.adopt_orphans`) but ours
    (`Grader.ours_pids`: the gauge's, eager now's) and those below them; the block gets the number of their threads not
    stopped yet after the wait. A process of ours (eager now's, `Ours`): its process group alone, as the candidate's
    process was stopped for the gauge's readings beside it (0)."""
    from cuda_agent.judge.uids import frozen

    if isinstance(grader, Ours):
        group = grader.shim.proc.pid
        with contextlib.suppress(OSError):
            os.killpg(group, signal.SIGSTOP)
        try:
            yield 0
        finally:
            with contextlib.suppress(OSError):
                os.killpg(group, signal.SIGCONT)
        return
    with frozen(grader.req.confine_user, grader.ours_pids) as running:
        yield running
