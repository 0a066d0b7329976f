"""The gauge (child/gauge.py): load that rose after the calibration is taken from the outside view's bound, work
hidden under it is not, and the candidate's processes stand still while the gauge measures."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from cuda_agent.judge.child.gauge import drift, held_still
from cuda_agent.judge.child.timing import external_bound

CALLS = 64
CLAIM_MS = 0.03 * CALLS
"""A request's claimed work: 64 calls of an honest 0.03 ms relu."""


def _overheads(median_ms: float, n: int, rng: random.Random) -> list[float]:
    return [median_ms + rng.uniform(-0.3, 0.3) for _ in range(n)]


def _phase(drift_ms: float, hidden_ms: float, rng: random.Random) -> tuple[list[float], list[float], list[float]]:
    """The candidate's and the gauge's calibrations at one load, then 12 requests (and 6 gauge readings) at a load
    `drift_ms` higher per request; the candidate's process hides `hidden_ms` of work a request from its claims."""
    calibration, gauge_calibration = _overheads(10.0, 16, rng), _overheads(10.5, 16, rng)
    claimed = [CLAIM_MS] * 12
    external = [c + o + hidden_ms for c, o in zip(claimed, _overheads(10.0 + drift_ms, 12, rng), strict=True)]
    gauge_seen = _overheads(10.5 + drift_ms, 6, rng)
    shifted = [o + drift(gauge_calibration, gauge_seen) for o in calibration]
    return claimed, external, calibration, shifted


def test_load_that_rose_after_the_calibration_is_not_read_as_hidden_work() -> None:
    claimed, external, calibration, shifted = _phase(drift_ms=6.0, hidden_ms=0.0, rng=random.Random(1))
    assert external_bound(claimed, external, calibration, "cpu", CALLS)["bound_applied"]  # the false alarm
    honest = external_bound(claimed, external, shifted, "cpu", CALLS)
    assert not honest["bound_applied"] and abs(honest["median_ms"] - 0.03) < 1e-9, honest


def test_work_hidden_under_the_same_load_is_still_seen() -> None:
    claimed, external, _, shifted = _phase(drift_ms=6.0, hidden_ms=20.0, rng=random.Random(2))
    phase = external_bound(claimed, external, shifted, "cpu", CALLS)
    assert phase["bound_applied"], phase
    assert phase["median_ms"] > 0.03 + 0.8 * 20.0 / CALLS, phase  # most of the hidden 0.31 ms a call counted


def test_a_load_that_rose_moves_by_the_median_and_one_that_fell_by_the_least() -> None:
    assert drift([10.0, 10.2, 9.9], [13.0, 13.0, 14.0]) == 3.0
    assert drift([10.0, 10.2, 9.9, 16.0], [7.0, 7.5, 8.0]) == pytest.approx(7.0 - 9.9)
    assert drift([10.0, 10.2, 9.9], [9.95, 10.1, 10.0]) == 0.0  # the least no lower: nothing moves
    assert drift([10.0, 10.2, 9.9], [7.0, 7.5]) == 0.0  # too few readings to move it down
    assert drift([10.0, 10.2, 9.9], []) == 0.0


def test_work_hidden_under_a_calibration_made_busier_is_seen_with_the_probes_slowed() -> None:
    # The calibration made while the machine was busier (its requests 6 ms slower than the phase's): every gap of the
    # phase lies below its least, and a claim that hides 4 ms a request passed. The candidate's process tells the
    # probes among the timed requests apart (`CallQuestion.probe`) and slows them, so they never move it down;
    # the gauge, with the candidate's processes stopped, sees the fall.
    rng = random.Random(3)
    calibration, gauge_calibration = _overheads(16.0, 16, rng), _overheads(16.5, 16, rng)
    claimed = [CLAIM_MS - 4.0] * 12
    external = [CLAIM_MS + o for o in _overheads(10.0, 12, rng)]
    gauge_seen = _overheads(10.5, 6, rng)
    assert not external_bound(claimed, external, calibration, "cpu", CALLS)["bound_applied"]
    moved = [o + drift(gauge_calibration, gauge_seen) for o in calibration]
    phase = external_bound(claimed, external, moved, "cpu", CALLS)
    assert phase["bound_applied"] and phase["median_ms"] > 0.9 * CLAIM_MS / CALLS, phase
    honest = external_bound([CLAIM_MS] * 12, external, moved, "cpu", CALLS)
    assert not honest["bound_applied"], honest  # the honest claim on the same requests keeps its time


def test_the_candidates_processes_stand_still_while_the_gauge_measures(tmp_path: Path) -> None:
    # Unconfined, every process below ours is stopped (confined, every process of its user: uids.frozen).
    count = tmp_path / "count"
    script = (
        "import sys, time\nn = 0\nwhile True:\n    n += 1\n    open(sys.argv[1], 'w').write(str(n))\n"
        "    time.sleep(0.005)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(count)], start_new_session=True)
    try:
        grader = SimpleNamespace(req=SimpleNamespace(confine_user=None), shim=SimpleNamespace(proc=proc), ours_pids=[])
        deadline = time.monotonic() + 10
        while not count.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        with held_still(grader):
            time.sleep(0.05)  # a write under way ends before the stop takes
            before = count.read_text()
            time.sleep(0.3)
            assert count.read_text() == before
        time.sleep(0.3)
        assert count.read_text() != before  # going on again
    finally:
        proc.kill()
        proc.wait()


def test_a_failed_request_of_a_process_of_ours_is_our_error_never_the_candidates_verdict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cuda_agent.judge.child.gauge import Ours
    from cuda_agent.judge.child.grader import Grader
    from cuda_agent.judge.child.stop import stop

    def raised(self, *args, **kwargs):
        raise stop("runtime_error", "calibration", "ModelNew.forward raised MemoryError")

    monkeypatch.setattr(Grader, "call", raised)
    with pytest.raises(RuntimeError, match="own shim process: runtime_error: ModelNew.forward raised MemoryError"):
        Ours.call(object.__new__(Ours), [], "calibration", probe=True)


ESCAPED = """
import os, sys, time
from cuda_agent.judge.uids import adopt_orphans, stopped_below
from cuda_agent.subproc import descendants

adopt_orphans()
count = sys.argv[1]
candidate = os.fork()
if candidate == 0:  # the candidate's process: leaves a process in a session of its own, then goes on as usual
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
            n = 0
            while True:
                n += 1
                open(count, "w").write(str(n))
                time.sleep(0.005)
        os._exit(0)
    time.sleep(60)
    os._exit(0)
deadline = time.monotonic() + 10
while not os.path.exists(count) and time.monotonic() < deadline:
    time.sleep(0.01)
with stopped_below(os.getpid()) as running:
    time.sleep(0.05)
    before = open(count).read()
    time.sleep(0.3)
    print(running, before == open(count).read())
time.sleep(0.3)
print(before != open(count).read())
for pid, _ in descendants(os.getpid()):
    os.kill(pid, 9)
"""


def test_a_process_the_candidate_left_in_a_session_of_its_own_stands_still_too(tmp_path: Path) -> None:
    # Unconfined, a process started in a new session and left by its parent was outside the stopped group and the
    # machine's init's: it could spin only while the gauge measured, widening the bound by the drift it made. The
    # grader is the orphans' reaper, and every process below it but ours stops.
    out = subprocess.run(
        [sys.executable, "-c", ESCAPED, str(tmp_path / "count")],
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,
    )
    assert out.stdout.split() == ["0", "True", "True"], (out.stdout, out.stderr)


def test_a_thread_that_does_not_stop_for_a_reading_is_the_candidates_rejection(monkeypatch: pytest.MonkeyPatch) -> None:
    # Dropping the reading let a thread kept in a system call through every reading leave the gauge with none, and
    # the calibration as a busier machine made it: as while eager is timed again, it is work while stopped.
    import contextlib

    from cuda_agent.judge.child import calibration, gauge
    from cuda_agent.judge.child.stop import Stop

    monkeypatch.setattr(gauge, "held_still", lambda grader: contextlib.nullcontext(2))
    monkeypatch.setattr(calibration, "probe", lambda *args: 9.0)
    sampler = gauge.Gauge.__new__(gauge.Gauge)
    sampler.grader, sampler.inputs, sampler.seen_ms, sampler.spent_s = None, [], [], 0.0
    sampler.ours = SimpleNamespace(shim=SimpleNamespace(proc=SimpleNamespace(pid=1)), group=1)
    with pytest.raises(Stop) as stopped:
        sampler.sample()
    result = stopped.value.result
    assert result.status == "rejected" and [v.check for v in result.violations] == ["work_while_stopped"]
    monkeypatch.setattr(gauge, "held_still", lambda grader: contextlib.nullcontext(0))
    sampler.sample()
    assert sampler.seen_ms == [9.0]


def test_a_process_of_ours_keeps_its_claims_where_the_outside_view_would_bound_them() -> None:
    # A load the calibration did not see reads as hidden work; on eager's side that would make eager slower and hand
    # the candidate a speed-up it did not earn, so the reference's claims stay its times (the reading is recorded).
    from cuda_agent.judge.child.timed_calls import ReferenceCalls

    req = SimpleNamespace(warmup_reps=3, min_reps=10, max_reps=100)
    calls = ReferenceCalls(SimpleNamespace(req=req, group=CALLS, flush=None, device="cpu"))
    rng = random.Random(3)
    calls.claimed_ms = [CLAIM_MS] * 12
    calls.external_ms = [c + o for c, o in zip(calls.claimed_ms, _overheads(16.0, 12, rng), strict=True)]
    calibration = _overheads(10.0, 16, rng)
    assert external_bound(calls.claimed_ms, calls.external_ms, calibration, "cpu", CALLS)["bound_applied"]
    phase = calls.read(calibration)
    assert phase["outside_view_bound"] and not phase["bound_applied"], phase
    assert abs(phase["median_ms"] - 0.03) < 1e-9 and phase["reps"] == 12, phase


def test_a_process_of_ours_calls_the_reference_it_was_asked_for_eager_or_compiled() -> None:
    # The shim's `reference` question (sent only to a process of ours): the task's reference with its own init
    # arguments, eager, or under torch.compile; a compile torch refuses is answered, not raised.
    import torch

    from cuda_agent.judge.child.shim import Shim
    from cuda_agent.judge.protocol import ReferenceQuestion
    from cuda_agent.tasks import Catalog

    task = Catalog().resolve("examples/relu")
    shim = Shim(None, "cpu")
    assert shim.reference(ReferenceQuestion(task_code=task.code, task_name=task.name), []).status == "ok"
    x = torch.randn(4, 8)
    assert torch.equal(shim.model(x), torch.relu(x)) and shim.model is shim.eager
    refused = ReferenceQuestion(task_code=task.code, task_name=task.name, compiled=True, compile_mode="no-such-mode")
    answer = shim.reference(refused, [])
    assert answer.status == "compile_error" and "no-such-mode" in answer.message and shim.model is shim.eager
