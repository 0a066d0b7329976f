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
Confined, that is every process of its user; unconfined, every process below the grader but the gauge's, the grader
being the reaper of every orphan below it (`uids.adopt_orphans`), so that a process the candidate's starts in a session of
its own and leaves is still found there.
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cuda_agent.judge.child.grader import Grader
from cuda_agent.judge.child.stop import Stop

if TYPE_CHECKING:
    from cuda_agent.judge.child.exchange import Channel
    from cuda_agent.judge.standby import Standby


class Ours(Grader):
    """The gauge's side of the exchange. Its process runs no candidate code, so whatever ends one of its requests
    (an exception, an answer out of shape) is our failure: an error, never the candidate's verdict."""

    def call(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().call(*args, **kwargs)
        except Stop as ended:
            raise RuntimeError(f"the judge's gauge process: {ended.result.status}: {ended.result.message}") from None


class Gauge:
    """A process of ours answering requests of the zero model (`Grader.call` with `probe`), as the candidate's did
    before its code loaded."""

    def __init__(self, grader: Grader, shim: Standby, channel: Channel) -> None:
        from cuda_agent.judge.child.grader import SHIM_STARTUP_S
        from cuda_agent.judge.child.shim import DEVICE_ENV

        self.grader = grader
        self.ours = Ours(grader.req, shim, channel)
        self.folder = tempfile.TemporaryDirectory(prefix="cuda-agent-gauge-")
        why_not = shim.wait_ready(SHIM_STARTUP_S)
        if why_not:
            raise RuntimeError(f"{why_not} (the judge's gauge process)")
        if grader.req.confine_user is None:
            from cuda_agent.judge.uids import adopt_orphans

            adopt_orphans()
        env = {"HOME": self.folder.name, "TMPDIR": self.folder.name, DEVICE_ENV: grader.device}
        shim.go([], Path(self.folder.name), env, None)
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
        with held_still(self.grader, spared=self.ours.shim.proc.pid) as running:
            if running:  # as while eager is timed again (calibration.time_reference)
                raise work_while_stopped(running)
            self.seen_ms.append(probe(self.ours, self.inputs, self.ours.group))
        self.spent_s += time.perf_counter() - start

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
        self.ours.exchange.close()
        self.ours.channel.close()
        self.ours.shim.close()
        self.folder.cleanup()


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
def held_still(grader: Grader, spared: int | None = None) -> Iterator[int]:
    """Every process of the candidate's stopped while the block runs (uids.frozen): its confinement's user's, or,
    unconfined, every process below this one (the grader, `uids.adopt_orphans`) but `spared` (the gauge's) and those
    below it. The block gets the number of their threads not stopped yet after the wait."""
    from cuda_agent.judge.uids import frozen

    with frozen(grader.req.confine_user, spared) as running:
        yield running
