"""Threats aimed at what the outside view takes for the candidate's process's own overhead, and at the gauge that
moves it (the attacks and their figures: bench/results/cpu-2026-12-07-redteam-14/).

- Work moved after the candidate's clock. The shim once copied what forward returned into the grader's output
  buffers after the clock stopped, inside the grader's outside view, and the calibration's zero model paid that
  copy: the outside view granted every request its calls' copies. The candidate's process holds the shim (it shares
  the process): it replaced the copy with its kernel writing the output straight into the buffer, forward returned
  a stub, and on a memory-bound task both cost alike: the stub's claim was taken. Now nothing is copied on either
  side: the grader stops every process of the candidate's as the answer arrives (the outside view ends there) and
  reads the outputs where forward left them (child/outputs.py). The same attack now leaves the stub where the grader
  reads (incorrect); its spellings against this design (the shim's account of where the outputs lie replaced by one
  that writes relu into them first, a thread that writes them after forward returned, a child forked at init that
  reads the input from its parent's memory and writes relu into memory they share) either leave a stub or put the
  work inside the outside view, which no calibration grants any more: the verdict's time is not the stub's.
- A process of the candidate's outside the stopped set loads the machine only while the gauge measures, and the
  gauge's drift, added to the calibration, widens the bound by as much. Confined, every process of its user stops
  (uids.frozen); unconfined (a judge not run as root), only its process group stopped, and a process in a session of
  its own ran on. Now every process below the grader but the gauge's stops (`uids.stopped_below`); the test's
  process outside the group kills the candidate's where it sees it stopped, which a drift's size on a shared machine
  would show less surely.
- Honest control: the same extension's OpenMP relu passes under both policies with the static policy on.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.judge.threats import _static
from tests.judge.threats._hacks import COMMON_CPP, _header, judge_hack, model_new, task_file

CPP = (
    COMMON_CPP
    + r"""
torch::Tensor relu(torch::Tensor x) { return relu_impl(x); }

void relu_out(torch::Tensor x, torch::Tensor out) {
    check_input(x);
    relu_into(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
}

torch::Tensor stub(torch::Tensor x) {
    check_input(x);
    auto out = torch::empty_like(x);
    const float v = x.data_ptr<float>()[0];
    out.data_ptr<float>()[0] = v < 0.0f ? 0.0f : v;
    return out;
}

torch::Tensor relu_omp(torch::Tensor x) {
    check_input(x);
    auto out = torch::empty_like(x);
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const int64_t n = x.numel();
#pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i] < 0.0f ? 0.0f : src[i];
    return out;
}
"""
)
HEADER = _header("judge_threat_round14_cpu", CPP, ["relu", "relu_out", "stub", "relu_omp"], openmp=True)
"""One build for every test here (ModelNew bodies hold no string constants: they would be in the build key)."""

GROUPED = {"time": True, "trials": 5, "robustness_trials": True, "warmup_reps": 3}

FIND_SHIM = """
import sys
frame, shim = sys._getframe(), None
while shim is None:
    frame = frame.f_back
    for value in frame.f_locals.values():
        try:
            value.timed
            value.probe
            shim = value
        except AttributeError:
            pass
self.shim = shim
"""
"""The shim (the object whose method constructs ModelNew), found up the stack by its methods' names."""

WORK_IN_THE_COPY = model_new(
    "self.pending = x\nreturn ext.stub(x)",
    init=FIND_SHIM
    + """
self.pending = None
model = self
def fused(out, value):
    ext.relu_out(model.pending, out)
self.shim.copy_out = fused
""",
)
"""Forward returns a stub its kernel wrote one element of; the shim's copy (round 14's spelling), replaced, writes relu
into the buffer."""

WORK_IN_THE_ACCOUNT = model_new(
    "self.pending.append(x)\nreturn ext.stub(x)",
    init=FIND_SHIM
    + """
self.pending = []
model = self
honest = type(self.shim).places
def fused(answer):
    for x, kept in zip(model.pending, model.shim.kept):
        ext.relu_out(x, kept[0])
    model.pending.clear()
    return honest(model.shim, answer)
self.shim.places = fused
""",
)
"""Forward returns a stub; the shim's first act after the clock, replaced, writes relu into each kept stub before the
answer: the outputs the grader reads are right, and the work ran after every claim's clock."""

WORK_IN_A_THREAD = model_new(
    "import threading\nout = ext.stub(x)\nthreading.Thread(target=ext.relu_out, args=(x, out)).start()\nreturn out",
)
"""Forward returns a stub and leaves a thread writing relu into it: before the grader stops the process, or never."""

ESCAPED_WATCHER = model_new(
    "return ext.relu(x.contiguous())",
    init="""
import os
import signal
import time
watched = os.getpid()
if os.fork() == 0:
    os.setsid()
    if os.fork() != 0:
        os._exit(0)
    seen, deadline = 0, time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{watched}/stat") as stat:
                state = stat.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            os._exit(0)
        seen = seen + 1 if state == "T" else 0
        if seen >= 10:
            os.kill(watched, signal.SIGKILL)
            os._exit(0)
        time.sleep(0.0005)
    os._exit(0)
""",
)
"""A process it leaves in a session of its own watches its process's state and, where it sees it stopped for 5 ms
while itself running (outside the stopped set, where a process could load the gauge's samples alone), kills it.
(Processes are stopped one by one: a grader preempted between two stops, on a loaded machine, shows a few ms.) Its
strings give it a build of its own (they count in the build key)."""


WORK_IN_A_CHILD = model_new(
    "slot = self.slot\nself.slot = (slot + 1) % 256\nself.order(x.data_ptr(), slot)\nreturn self.outs[slot]",
    init="""
import ctypes
import mmap
import os
import struct
libc = ctypes.CDLL(None)
libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: its child may read its memory
n = 128 * 1024
self.region = mmap.mmap(-1, 256 * n * 4)  # shared with the child
self.outs = [torch.frombuffer(self.region, dtype=torch.float32, count=n, offset=i * n * 4).view(128, 1024) for i in range(256)]
read, orders = os.pipe()
parent = os.getpid()
if os.fork() == 0:
    class IoVec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
    local = torch.empty(128, 1024)
    while True:
        order = os.read(read, 16)
        if len(order) < 16:
            os._exit(0)
        address, slot = struct.unpack("QQ", order)
        mine, theirs = IoVec(local.data_ptr(), n * 4), IoVec(address, n * 4)
        libc.process_vm_readv(parent, ctypes.byref(mine), 1, ctypes.byref(theirs), 1, 0)
        ext.relu_out(local, self.outs[slot])
self.slot = 0
self.order = lambda address, slot: os.write(orders, struct.pack("QQ", address, slot))
""",
)
"""Forward hands its input's address to a child forked at init and returns an unwritten block of memory shared with
it; the child reads the input from its parent's memory and writes relu there, after forward's clock."""


@pytest.mark.slow
def test_work_moved_into_the_shims_copy_of_the_outputs_is_charged(tmp_path: Path) -> None:
    verdict = judge_hack(
        tmp_path, "examples/relu", WORK_IN_THE_COPY, HEADER, static_policy=False, verdict_cache=False, **GROUPED
    )
    timing = verdict.env.get("timing", {}).get("solution", {})
    # Once: pass, its claim (the stub's, about 0.005 ms a call against eager's 0.021) taken as the verdict's time. Now
    # the output is read where forward left it: the stub, incorrect.
    assert verdict.verdict != "pass" or timing["claimed_median_ms"] >= 0.5 * verdict.timings_ms.eager, timing
    assert verdict.verdict == "incorrect", verdict.message


@pytest.mark.slow
@pytest.mark.parametrize(
    "attack", [WORK_IN_THE_ACCOUNT, WORK_IN_A_THREAD, WORK_IN_A_CHILD], ids=["account", "thread", "child"]
)
def test_work_after_the_clock_is_inside_the_outside_view(tmp_path: Path, attack: str) -> None:
    verdict = judge_hack(tmp_path, "examples/relu", attack, HEADER, static_policy=False, verdict_cache=False, **GROUPED)
    timing = verdict.env.get("timing", {}).get("solution", {})
    # Right outputs with the stub's claims (a tenth of eager's call) would pass on those claims; the outside view,
    # which no longer grants a copy, holds the work, and where it resolves the stub's gap (its per-call noise below
    # it) its reading takes over: the verdict's time is not the stub's (or the outputs read were stubs). Eager as
    # cached, not rescaled by eager now (a load spike there moves it 4x, which no candidate's time decides).
    eager = verdict.env["timing"]["eager"]["median_ms"] if verdict.verdict == "pass" else 0.0
    if verdict.verdict == "pass" and timing["resolution_ms"] < 0.5 * eager:
        assert verdict.timings_ms.solution >= 0.5 * eager, timing
        assert timing["bound_applied"] or timing["claimed_median_ms"] >= 0.5 * eager, timing


@pytest.mark.slow
def test_no_process_the_candidate_leaves_runs_while_the_gauge_measures(tmp_path: Path) -> None:
    if _static.POLICY == "kernelbench":
        pytest.skip("the stop is the same under either policy: judged under cuda-agent")
    # Unconfined (candidate_user None: as a judge run by a plain user is), where only the process group stopped: a
    # process in a session of its own ran on, and saw the candidate's stopped (two processes spinning then made the
    # gauge's drift 3.6 to 18 ms a request against honest judgements' 0.3 to 1.4, and a claim of a fifth of the work
    # was taken). Every process below the grader but the gauge's now stops with it.
    verdict = judge_hack(
        tmp_path,
        "examples/relu",
        ESCAPED_WATCHER,
        HEADER,
        static_policy=False,
        candidate_user=None,
        verdict_cache=False,
        **GROUPED,
    )
    assert verdict.verdict == "pass", verdict.message  # killed by its watcher: runtime_error


@pytest.mark.slow
def test_an_honest_openmp_relu_of_the_same_build_passes(tmp_path: Path) -> None:
    honest = model_new("return ext.relu_omp(x.contiguous())")
    verdict = judge_hack(tmp_path, "examples/relu", honest, HEADER, verdict_cache=False, **GROUPED)
    assert verdict.verdict == "pass", verdict.message
    assert verdict.reward >= 1


CUDA_CPP = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_kernel(const float* x, float* y, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float v = x[i];
        y[i] = v < 0.f ? 0.f : v;
    }
}

void relu_out(torch::Tensor x, torch::Tensor out) {
    relu_kernel<<<1024, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), out.data_ptr<float>(),
                                                                     x.numel());
}

torch::Tensor stub(torch::Tensor x) {
    auto y = torch::empty_like(x);
    relu_kernel<<<1, 1, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), 1);
    return y;
}
"""

CUDA_HEADER = f'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline(
    name="judge_threat_round14_cuda",
    cpp_sources="void relu_out(torch::Tensor x, torch::Tensor out);\\ntorch::Tensor stub(torch::Tensor x);",
    cuda_sources=r"""{CUDA_CPP}""",
    functions=["relu_out", "stub"],
    verbose=False,
)

'''

BIG_RELU = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(8192, 8192)]


def get_init_inputs():
    return []
"""
"""256 MiB a call: memory-bound, its copy as long as its work (about 0.17 ms on an H100 either)."""


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("attack", [WORK_IN_THE_COPY, WORK_IN_THE_ACCOUNT], ids=["copy", "account"])
def test_work_moved_into_the_shims_copy_is_charged_on_cuda(tmp_path: Path, attack: str) -> None:
    from cuda_agent.judge import JudgeConfig, judge
    from cuda_agent.judge.solution import SolutionSource
    from cuda_agent.tasks import Catalog

    task = Catalog().resolve(task_file(tmp_path, "big_relu", BIG_RELU))
    config = JudgeConfig(device="cuda", policy=_static.POLICY, static_policy=False, verdict_cache=False, **GROUPED)
    verdict = judge(task, SolutionSource(python=CUDA_HEADER + attack), config)
    timing = verdict.env.get("timing", {}).get("solution", {})
    # Once (expected): pass at reward 3, its claim the stub's launch (microseconds) against eager's ~0.17 ms. Now the
    # copy's spelling leaves the stub where the grader reads (incorrect); the account's kernel, launched after the
    # clock, ran before the grader's copy (inside the outside view, which takes over) or after it (a stub read).
    assert verdict.verdict != "pass" or verdict.timings_ms.solution >= 0.5 * verdict.timings_ms.eager, timing
