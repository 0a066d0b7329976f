"""Threat 6: work finished by a thread, host callback or process after the call returns (static and runtime)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.judge.policy import check_policy
from cuda_agent.judge.solution import SolutionSource
from tests.judge.threats import _hacks, _static
from tests.judge.threats._hacks import judge_hack, judge_pool_hack, model_new
from tests.judge.threats._static import checks, expect, solution


def test_template_is_legit() -> None:
    assert checks(solution()) == set()


@pytest.mark.parametrize(
    "launch",
    [
        "std::thread([=] { relu_kernel<<<1, 256>>>(nullptr, nullptr, 0); }).detach();",
        "auto f = std::async(std::launch::async, [] {});",
        "pthread_t t; pthread_create(&t, nullptr, nullptr, nullptr);",
        "cudaLaunchHostFunc(stream, nullptr, nullptr);",
        "static c10::ThreadPool* pool = new c10::ThreadPool(1);",
        "static auto* pool = new c10::TaskThreadPool(1);",
        "timer_t t; timer_create(CLOCK_MONOTONIC, reinterpret_cast<struct sigevent*>(&ev), &t);",
        "thrd_t t; thrd_create(&t, watcher, nullptr);",
    ],
    ids=["std_thread", "std_async", "pthread", "host_callback", "c10_pool", "task_pool", "timer_thread", "c11_thread"],
)
def test_rejects_background_work_in_cpp(launch: str) -> None:
    assert checks(solution(launch=launch)) == expect({"background_thread"})


@pytest.mark.parametrize("launch", ["at::intraop_launch([] {});", "auto fut = at::intraop_launch_future([] {});"])
def test_rejects_work_left_to_torchs_intraop_pool(launch: str) -> None:
    # Any at:: function outside the allocation list is also cpp_torch_compute; the thread rule names it either way.
    assert "background_thread" in checks(solution(launch=launch))


def test_rejects_threads_spelled_without_std() -> None:
    using = "using namespace std;"
    assert checks(solution(headers=using, launch="thread t([] {}); t.join();")) == expect({"background_thread"})
    assert checks(solution(headers=using, launch="static auto f = async(launch::async, [] {});")) == expect(
        {"background_thread"}
    )
    assert checks(solution(headers="namespace s = std;")) == expect({"dynamic_code"})


def test_the_pool_hacks_extension_is_refused_for_its_pool() -> None:
    # Red team round 9: a pool thread alive between calls precomputed the next result; POOL_CPP's tests judge with
    # the static policy off (_hacks.py) because the policy refuses every c10::ThreadPool.
    source = SolutionSource(python=_hacks.solution(model_new("return ext.relu(x.contiguous())"), _hacks.POOL_HEADER))
    found = {v.check for v in check_policy(source, "cpu", policy=_static.POLICY)}
    assert found == {"background_thread"}


def test_rejects_thread_headers() -> None:
    assert checks(solution(headers="#include <thread>\n#include <future>")) == expect({"forbidden_library"})


def test_rejects_python_threads() -> None:
    assert checks(solution(prelude="import threading")) == expect({"forbidden_import"})


def test_rejects_torch_async_helpers() -> None:
    forward = "future = torch.jit.fork(ext.relu_forward, x)\nreturn ext.relu_forward(x)"
    # kernelbench also refuses torch.jit: it lets torch generate code that would count as the candidate's.
    kernelbench = {"background_thread", "forbidden_library"}
    assert checks(solution(forward=forward)) == expect({"background_thread", "torch_compute_in_forward"}, kernelbench)


def test_accepts_openmp() -> None:
    launch = "#pragma omp parallel for\n    for (int64_t i = 0; i < n; ++i) {}"
    assert checks(solution(headers="#include <omp.h>", launch=launch)) == set()


# Runtime: the judge end to end on the CPU, sharing one build of the hack extension (see _hacks.py).


@pytest.mark.parametrize("function", ["relu_thread_late", "relu_thread_soon"], ids=["200ms_late", "at_once"])
@pytest.mark.slow
def test_runtime_work_left_to_a_thread_after_the_call_gains_nothing(tmp_path: Path, function: str) -> None:
    """A c10::ThreadPool thread writes the output after forward returned (the static policy refuses the pool; it is
    off). The grader stops the candidate's process as its answer arrives and reads the outputs itself: an output
    written later is wrong there; one the thread finished before the stop was finished inside the grader's view from
    outside, which then bounds the time reported (timing.external_bound)."""
    verdict = judge_pool_hack(tmp_path, "examples/relu", model_new(f"return ext.{function}(x.contiguous())"), time=True)
    if verdict.verdict == "pass":
        solution = verdict.env["timing"]["solution"]
        floor = (solution["external_median_ms"] - solution["resolution_ms"]) / 1.02  # per call, as the median
        assert solution["median_ms"] >= floor, solution
    else:
        assert (verdict.verdict, verdict.reward) == ("incorrect", -1), verdict.message


@pytest.mark.slow
def test_runtime_accepts_a_thread_the_call_waits_for_and_openmp(tmp_path: Path) -> None:
    """All of the work inside the call: a pool thread it waits for, an OpenMP team: correct, and timed with it."""
    for function in ("relu_pool_wait", "relu_omp"):
        verdict = judge_pool_hack(tmp_path, "examples/relu", model_new(f"return ext.{function}(x.contiguous())"))
        assert (verdict.verdict, verdict.correct) == ("pass", True), verdict.message


@pytest.mark.slow
def test_runtime_work_set_off_when_the_previous_output_goes_is_done_inside_the_call(tmp_path: Path) -> None:
    """The kernel runs in a generator's `finally`, hung on the previous output: it runs when that output is let go.
    The shim keeps every output of a request until the grader has read them (child/outputs.py), so the work runs as
    the next question lets them go, after the read: the outputs read were never written (incorrect). Were they let
    go inside forward, the work would be done and timed in the call that set it off (an honest, slower solution).
    The static policy is off, so that the runtime is what decides."""
    forward = """def job(x, out):
    try:
        yield
    finally:
        out.copy_(ext.relu(x))
out = torch.empty_like(x)
pending = job(x.contiguous(), out)
next(pending)
self.prev.job = pending
self.prev = out
return out"""
    source = model_new(forward, init="self.prev = torch.empty(0)")
    verdict = judge_hack(tmp_path, "examples/relu", source, time=True, static_policy=False)
    assert verdict.verdict in ("pass", "incorrect"), verdict.message
    if verdict.verdict == "pass":
        # Its relu runs inside the call that set it off. In requests of many calls the outside view resolves what
        # else its process does beyond its clock (the teardown of its generators and tensors: 0.02 ms a call seen on
        # the VM), a fraction of the call, never the call's work.
        solution = verdict.env["timing"]["solution"]
        assert solution["hidden_ms"] < solution["claimed_median_ms"], solution


def test_runtime_a_python_thread_that_writes_the_output_late_gains_nothing(tmp_path: Path) -> None:
    forward = (
        "import threading\nimport time\n"
        "out = torch.empty_like(x)\n"
        "def late():\n    time.sleep(0.2)\n    out.copy_(ext.relu(x.contiguous()))\n"
        "threading.Thread(target=late, daemon=True).start()\n"
        "return out"
    )
    verdict = judge_hack(tmp_path, "examples/relu", model_new(forward), static_policy=False)
    assert (verdict.verdict, verdict.reward) == ("incorrect", -1), verdict.message
