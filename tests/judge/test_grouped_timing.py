"""Requests of several calls (child/timing.py's `group_size`): on a task whose call is below the outside view's
per-call noise, a clock that runs slow in the candidate's process gains nothing, an honest solution as fast as
eager is judged as fast as eager, and no call of a request can compute a later call's output ahead or leave its own
for later (its inputs come as the call before returns, whose outputs are read then: child/release.py).

One extension for the module (its build is shared: every ModelNew below holds no string constant, so the build key
is the same), judged on the CPU with the static policy off (the spellings it refuses are not the defence here).
The GPU's forms (a hook that makes CUDA events read short) are in tests/judge/test_gpu.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.judge import JudgeConfig, judge
from cuda_agent.judge.solution import SolutionSource
from cuda_agent.reward import beats
from cuda_agent.tasks import Catalog
from cuda_agent.types import Verdict
from tests.judge.threats._hacks import _header, model_new

pytestmark = pytest.mark.slow

CPP = r"""
#include <torch/extension.h>
#include <ATen/CPUFunctions.h>

torch::Tensor relu_aten(torch::Tensor x) {
    // ATen's own CPU kernel for relu (clamp_min), called without the dispatcher: eager's work, as fast as eager.
    return at::cpu::clamp_min(x, 0);
}
"""
HEADER = _header("grouped_timing_cpu", CPP, ["relu_aten"])

SPIN = "start = self.real()\nwhile self.real() - start < 0.0005:\n    pass\n"
"""Half a millisecond of work a call on the real clock: slower than eager and compile (reward 1 if told honestly),
below one call's outside-view noise on a loaded 2-core machine (0.5 to 8 ms), far above a request's per call."""
HONEST = model_new(SPIN + "return ext.relu_aten(x)", init="import time\nself.real = time.perf_counter")
SLOW_CLOCK = model_new(
    SPIN + "return ext.relu_aten(x)",
    # r02 of round 11 (bench/results/cpu-2026-12-07-redteam-10/) as a clock: the process's perf_counter, which the
    # shim times forward with, runs 50 times slow from the candidate's first line on.
    init="import time\nself.real = time.perf_counter\ntime.perf_counter = lambda: self.real() / 50",
)
EAGER = model_new("return ext.relu_aten(x)")


def _judge(tmp_path: Path, model: str, release: bool | None = None) -> Verdict:
    source = HEADER + "\n" + model.strip() + "\n"
    (tmp_path / "solution.py").write_text(source)
    config = JudgeConfig(device="cpu", static_policy=False, verdict_cache=False)
    if release is not None:  # else the default
        config = config.model_copy(update={"release_per_call": release})
    return judge(Catalog().resolve("examples/relu"), SolutionSource(python=source), config)


def _solution_timing(verdict: Verdict) -> dict:
    return verdict.env["timing"]["solution"]


def test_a_clock_run_slow_in_the_candidates_process_gains_nothing_on_a_tiny_task(tmp_path: Path) -> None:
    honest = _judge(tmp_path, HONEST)
    faked = _judge(tmp_path, SLOW_CLOCK)
    assert honest.verdict == "pass" and faked.verdict == "pass", (honest.message, faked.message)
    timing = _solution_timing(faked)
    assert timing["calls_per_request"] > 1 and timing["bound_applied"], timing
    assert faked.reward <= honest.reward, (faked.timings_ms, honest.timings_ms)
    assert faked.timings_ms.solution >= 0.5 * honest.timings_ms.solution, (timing, _solution_timing(honest))


def test_an_honest_solution_as_fast_as_eager_is_judged_as_fast_as_eager_in_requests_of_several_calls(
    tmp_path: Path,
) -> None:
    # Its calls and eager's contain the same: a group of calls after one flush (the first cold, the others warm), each
    # on inputs of its own; its time is its request's claims over the calls, eager's its group's time over the calls.
    verdict = _judge(tmp_path, EAGER)
    assert verdict.verdict == "pass", verdict.message
    timing, t = _solution_timing(verdict), verdict.timings_ms
    assert timing["calls_per_request"] > 1 and not timing["bound_applied"], timing
    assert verdict.env["timing"]["eager"].get("reps"), verdict.env["timing"]
    assert not beats(t.solution, t.eager, t.solution_ci, t.eager_ci), t  # not faster than eager beyond the interval
    assert not beats(t.eager, t.solution, t.eager_ci, t.solution_ci), t  # nor slower


# A request's calls as the candidate's process holds them: the shim's `calls` frame, found by walking up from forward.
FIND_REQUEST = (
    "import sys\nf = sys._getframe(1)\nwhile 'message' not in f.f_locals:\n    f = f.f_back\n"
    "shim, message = f.f_locals['self'], f.f_locals['message']\n"
    "k = next((i for i, c in enumerate(getattr(message, 'calls', [])) if c is f.f_locals.get('slots')), -1)\n"
    "if k < 0:  # the profile's calls\n    return ext.relu_aten(x)\n"
)
LOOK_AHEAD = model_new(
    FIND_REQUEST + "if k == 0:\n"
    "    self.blind = False\n"
    "    try:  # the later calls' inputs, to compute them all now (one batch, where a kernel allows it)\n"
    "        later = [c.inputs[0].tensor for c in message.calls[1:]]\n"
    "        self.blind = not all(any(shim.buffers[t.buffer].region[:4096]) for t in later)  # not written yet\n"
    "        self.ahead = [ext.relu_aten(shim.tensor(t)) for t in later]\n"
    "    except KeyError:  # not in this process yet\n"
    "        self.blind = True\n"
    "    return torch.zeros_like(x) if self.blind else ext.relu_aten(x)\n"
    "return torch.zeros_like(x) if self.blind else self.ahead[k - 1]",
    init="self.blind, self.ahead = False, []",
)
"""Reads the later calls' inputs of its request during its first call and computes them there; where it cannot (they
are not in its process, or their buffers are still empty), it answers zeros for the whole request, so that its
verdict says which it met."""
DRIVE_AHEAD = model_new(
    FIND_REQUEST + "release = message.release\n"
    "if k == 0 and release is not None:\n"
    "    control = shim.control(release.control)\n"
    "    self.stubs = [torch.zeros_like(x) for _ in message.calls]\n"
    "    for j in range(1, len(message.calls)):  # each next call's inputs asked for itself, before any output\n"
    "        control.put_places([self.stubs[j - 1]])  # where the grader is to read call j - 1's outputs\n"
    "        control.bump(0, release.first + j, 32)\n"
    "        control.wait(16, release.first + j, 1.0, 48, None)\n"
    "    control.call_returned = lambda outputs, count: None  # its own loop no longer asks\n"
    "    self.ahead = [ext.relu_aten(shim.argument(c.inputs[0])) for c in message.calls]  # one batch, in effect\n"
    "    for stub, out in zip(self.stubs, self.ahead):\n"
    "        stub.copy_(out)  # the outputs written where it said they lie: after the grader's copies\n"
    "if release is None:\n"
    "    return ext.relu_aten(x)\n"
    "return self.stubs[k]",
    init="self.stubs, self.ahead = [], []",
)
"""Drives the release of its request's inputs itself from its first call (the control block is its process's too):
it says each call has returned, with its outputs in stubs it writes only once it has every call's inputs."""
LATE_WRITE = model_new(
    "if self.late is not None:  # the call before's output, written after that call returned\n"
    "    self.late[1].copy_(ext.relu_aten(self.late[0]))\n"
    "out = torch.zeros_like(x)\n"
    "self.late = (x, out)\n"
    "return out",
    init="self.late = None",
)
"""Returns each call's output unwritten and writes it during the next call (work of call k done in call k + 1's time,
as a pipeline across the calls would)."""


def test_no_call_of_a_request_sees_a_later_calls_inputs(tmp_path: Path) -> None:
    # A request's later inputs in the process during its first call could be batched into one launch, which the
    # baselines' calls cannot (a gain of K - 1 launches on a tiny task, the outputs all correct): each is written
    # into its buffer only once the call before has returned (child/release.py).
    verdict = _judge(tmp_path, LOOK_AHEAD, release=True)
    assert verdict.verdict == "incorrect", verdict.message  # blind: it answered zeros
    assert verdict.checks and not any(c["ok"] for c in verdict.checks), verdict.checks  # from its first request on


def test_driving_the_release_itself_gets_the_inputs_only_after_the_outputs_were_read(tmp_path: Path) -> None:
    verdict = _judge(tmp_path, DRIVE_AHEAD, release=True)
    assert verdict.verdict == "incorrect", verdict.message  # the grader copied the stubs as it released
    assert verdict.checks and not verdict.checks[-1]["ok"], verdict.checks  # (a request's last call is right)


def test_an_output_written_after_its_call_returned_is_wrong(tmp_path: Path) -> None:
    verdict = _judge(tmp_path, LATE_WRITE, release=True)
    assert verdict.verdict == "incorrect", verdict.message
    assert verdict.checks and not any(c["ok"] for c in verdict.checks), verdict.checks
