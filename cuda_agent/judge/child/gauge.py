"""The machine's load as the timed phase runs, seen by a process of ours shaped as the candidate's: the drift of a
request's overhead since the calibration, so that load that came later is not read as work the candidate hid.

The outside view's bound (`timing.external_bound`) holds the candidate's requests to the overhead calibrated on its
process before its code loaded. Load that rises after that (another judgement, a build) lengthens every request's
gap alike, and an honest solution's time would become the outside view's (figures in DESIGN.md). The gauge is a
second shim process, started as a timed run begins (grader.run), which never loads candidate code: it is calibrated
beside the candidate's process (`calibrate_beside`: their requests interleaved), and after every other timed request
(timed_calls.GAUGE_EVERY) it makes one request of as many calls of the zero model (`sample`). The median of those
less the median of its calibration is the drift (never below zero), added to the candidate's calibration.

While the gauge's request runs, every process of the candidate's is stopped (`held_still`): it cannot load the
machine only while the gauge is measured, which would widen the bound by what it spins and let it hide as much.
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
        self.channel.close()
        self.shim.close()
        self.folder.cleanup()


class Gauge:
    """A process of ours answering requests of the zero model (`Grader.call` with `probe`), as the candidate's did
    before its code loaded."""

    def __init__(self, grader: Grader, started: tuple[Standby, Channel] | None = None) -> None:
        self.grader = grader
        self.ours = Ours(grader.req, started)
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
            seen = probe(self.ours, self.inputs, self.ours.group)
        if not running:  # a thread of the candidate's still at work (in a system call) could load only this reading
            self.seen_ms.append(seen)
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
            "drift_ms": self.drift_ms(),
        }

    def close(self) -> None:
        self.ours.close()


def drift(calibrated_ms: list[float], seen_ms: list[float]) -> float:
    """How much longer the gauge's requests take now than at its calibration (medians), never below zero: a load
    that fell leaves the candidate's calibration as it was (the bound never narrows on our reading)."""
    if not calibrated_ms or not seen_ms:
        return 0.0
    return max(0.0, statistics.median(seen_ms) - statistics.median(calibrated_ms))


@contextlib.contextmanager
def held_still(grader: Grader) -> Iterator[int]:
    """Every process of the candidate's stopped while the block runs: its confinement's user's (uids.frozen: the block
    gets the number of its threads not stopped yet after the wait), or, unconfined, its process's group (it runs as
    we do: what it started outside the group runs on; 0)."""
    from cuda_agent.judge.uids import frozen

    uid = grader.req.confine_user
    if uid is not None:
        with frozen(uid) as running:
            yield running
        return
    group = grader.shim.proc.pid
    with contextlib.suppress(OSError):
        os.killpg(group, signal.SIGSTOP)
    try:
        yield 0
    finally:
        with contextlib.suppress(OSError):
            os.killpg(group, signal.SIGCONT)
