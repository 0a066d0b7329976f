"""The baseline process: what it records about a reference's eager and torch.compile timings, taken through a shim
process of ours by the candidate's protocol. Each test starts two such processes (the reference's and the CPU's
gauge) and compiles the reference: slow."""

from __future__ import annotations

import pytest
import torch

from cuda_agent.judge.child import baseline
from cuda_agent.judge.protocol import BaselineRequest
from cuda_agent.tasks import Catalog

pytestmark = pytest.mark.slow


def _request() -> BaselineRequest:
    task = Catalog().resolve("examples/relu")
    return BaselineRequest(
        task_code=task.code,
        task_name=task.name,
        device="cpu",
        compile_mode=None,
        warmup_reps=1,
        min_reps=2,
        max_reps=3,
        target_phase_s=0.01,
        group_calls=1,
    )


def test_a_reference_compile_cannot_handle_is_timed_eager_only() -> None:
    # torch.compile refuses the mode in the process of ours that calls the reference: eager is timed, compile is not.
    result = baseline.run(_request().model_copy(update={"compile_mode": "no-such-mode"}))
    assert result.error is None and result.eager and result.eager["reps"] >= 2
    assert result.compile is None and "no-such-mode" in result.compile_error


def test_running_out_of_memory_while_compiling_is_ours_not_a_compile_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # Another judgement's memory, not the reference: a compile_error would be cached for good and every later
    # verdict of the task would lose its torch.compile baseline. The process of ours answers a call that ran out of
    # memory as a candidate's would (its out_of_memory flag): here, the compiled reference's first call.
    from cuda_agent.judge.child.gauge import Ours, OursFailed
    from cuda_agent.judge.protocol import RunResult

    call = Ours.call

    def out_of_memory(self, refs, stage, **kwargs):
        if self.compiled and stage == "warm":
            raise OursFailed(RunResult(status="runtime_error", message="CUDA out of memory", out_of_memory=True))
        return call(self, refs, stage, **kwargs)

    monkeypatch.setattr(Ours, "call", out_of_memory)
    with pytest.raises(OursFailed, match="out of memory"):
        baseline.run(_request())


HOLD_S = 6.0
"""How long the test holds a turn once the builds are done: longer than the timed part of a run on the loaded VM."""


def test_with_gpu_turns_it_builds_in_a_shared_turn_and_times_in_an_exclusive_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    # The turns are flocks on files, so this test's own turns and the run's (in a thread) exclude each other as
    # two processes' would.
    import threading
    import time

    from cuda_agent.gpu_turns import GpuTurns

    events: list[str] = []
    warm, time_model = baseline._warm, baseline._time_model
    monkeypatch.setattr(baseline, "_warm", lambda *a: (warm(*a), events.append("warm"))[0])  # once built
    monkeypatch.setattr(baseline, "_time_model", lambda *a, **k: (events.append("time"), time_model(*a, **k))[1])
    request = _request().model_copy(update={"gpu_turns": str(tmp_path / "turns")})
    ours = GpuTurns(tmp_path / "turns")

    def run_beside(turn, builds: int) -> tuple[list[str], object]:
        events.clear()
        out: dict = {}
        with turn():
            thread = threading.Thread(target=lambda: out.update(result=baseline.run(request)))
            thread.start()
            deadline = time.monotonic() + 120  # a loaded machine sets up slowly: wait for the builds it may do
            while events.count("warm") < builds and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(HOLD_S)  # and a while more, in which it must not time
            seen = list(events)
        thread.join(180)
        return seen, out["result"]

    # Beside another shared turn (a standby worker starting, another build): it sets up and builds, then waits.
    seen, result = run_beside(ours.shared, builds=2)
    assert seen == ["warm", "warm"]  # eager and compiled, built; nothing timed while the shared turn was held
    assert events == ["warm", "warm", "time", "time"] and result.eager and result.compile
    # Held to time (the calibration beside the gauge, two phases), not to build (tens of seconds of compiling).
    assert result.gpu_wait_s > HOLD_S - 0.5 and 0 < result.gpu_held_s < result.gpu_wait_s

    # During another exclusive turn (a candidate's run): it does not even start to build.
    seen, result = run_beside(ours.exclusive, builds=0)
    assert seen == [] and events == ["warm", "warm", "time", "time"] and result.gpu_wait_s > 0.5


def test_without_gpu_turns_it_takes_none() -> None:
    result = baseline.run(_request())
    assert result.eager and result.compile and result.gpu_held_s == 0.0 and result.gpu_wait_s == 0.0


def test_out_of_memory_beside_other_shared_turns_builds_again_alone(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    # Other baselines' working sets share the GPU in shared turns: a build that runs out of memory there is done
    # again in the exclusive turn (as every build was before), not reported as our failure.
    import threading
    import time

    from cuda_agent.gpu_turns import GpuTurns

    events: list[str] = []
    warm = baseline._warm

    def warm_once_short_of_memory(*args) -> None:
        if not events:
            events.append("out of memory")
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB")
        events.append("warm")
        warm(*args)

    monkeypatch.setattr(baseline, "_warm", warm_once_short_of_memory)
    request = _request().model_copy(update={"gpu_turns": str(tmp_path / "turns")})
    out: dict = {}
    with GpuTurns(tmp_path / "turns").shared():
        thread = threading.Thread(target=lambda: out.update(result=baseline.run(request)))
        thread.start()
        deadline = time.monotonic() + 30
        while not events and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)
        seen = list(events)  # its first build failed in its shared turn; the second waits for the exclusive one
    thread.join(60)
    result = out["result"]
    assert seen == ["out of memory"] and events == ["out of memory", "warm", "warm"]
    assert result.eager and result.compile and result.compile_error is None and result.env["built_alone"] is True


def test_without_a_run_it_chooses_the_calls_per_group_itself_and_times_each_call_on_its_own_inputs() -> None:
    # Reference timings alone (`cuda-agent bench baselines`): no candidate's run chose the calls per request, so the
    # process chooses them from eager's time as the grader would, and says how many (the runs that read the cached
    # baseline then make requests of as many calls).
    request = _request().model_copy(update={"group_calls": None, "max_group_calls": 8})
    result = baseline.run(request)
    # A 0.05 ms relu beside 0.5 ms of noise wants the cap (fewer on a machine so loaded that relu takes milliseconds).
    assert result.error is None and result.group_calls in (1, 2, 4, 8)
    assert result.eager["reps"] >= 2 and result.compile["reps"] >= 2


@pytest.mark.gpu
def test_on_cuda_the_reference_is_timed_through_a_process_of_ours_with_its_kernel_times() -> None:
    # CUDA IPC buffers between this process and the process of ours that calls the reference; the calls per request
    # chosen here as the grader would; kernel times from that process's profiler (the `profile` message).
    request = _request().model_copy(update={"device": "cuda", "group_calls": None, "min_reps": 20, "max_reps": 200})
    result = baseline.run(request)
    assert result.error is None and result.compile_error is None, (result.error, result.compile_error)
    for phase in (result.eager, result.compile):
        assert phase["reps"] >= 6 and phase["calls_per_group"] == result.group_calls > 1, phase
        assert not phase["bound_applied"] and phase["kernel"]["median_ms"] > 0, phase
