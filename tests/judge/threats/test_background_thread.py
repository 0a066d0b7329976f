"""Threat 6: work finished by a thread, host callback or process after the call returns (static and runtime)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from cuda_agent.judge.child.trial import judge_trial
from cuda_agent.judge.policy import check_policy
from cuda_agent.judge.solution import SolutionSource
from tests.judge.threats import _hacks, _static
from tests.judge.threats._hacks import checks_of, judge_hack, judge_pool_hack, model_new
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
    ],
    ids=["std_thread", "std_async", "pthread", "host_callback", "c10_pool", "task_pool"],
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


@pytest.mark.parametrize(
    ("function", "time"),
    [("relu_thread_late", False), ("relu_thread_soon", True), ("relu_pool_wait", True)],
    ids=["writes_200ms_late", "writes_after_the_clock", "waits_for_its_thread"],
)
def test_runtime_rejects_a_native_thread_left_running_between_calls(tmp_path: Path, function: str, time: bool) -> None:
    """A c10::ThreadPool thread outlives the call that started it (the static policy refuses the pool; it is off).

    Red team round 9 kept such a thread polling the memory the judge's next input would be drawn into, and
    computed the result during the cache flush, before the clock started: nothing was written after forward
    returned, so only the thread itself shows. The thread census (`guards.new_native_threads`, after every call)
    sees it on the first trial, whatever the thread does: write 200 ms late, write as soon as the call returned
    (round 7; the timed-output sampling is the layer behind), or nothing outside the call at all.
    """
    verdict = judge_pool_hack(tmp_path, "examples/relu", model_new(f"return ext.{function}(x.contiguous())"), time=time)
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", {"background_thread"}), verdict.message
    assert "pt_thread_pool" in verdict.message and verdict.checks == []  # at the first trial, before it was judged


def test_runtime_accepts_openmp_in_the_candidates_kernel(tmp_path: Path) -> None:
    """An OpenMP team of the default size is torch's own intra-op team, started before the census: no finding."""
    verdict = judge_pool_hack(tmp_path, "examples/relu", model_new("return ext.relu_omp(x.contiguous())"), time=True)
    assert (verdict.verdict, verdict.correct) == ("pass", True), verdict.message


def test_runtime_rejects_work_set_off_when_the_judge_lets_the_previous_output_go(tmp_path: Path) -> None:
    """The kernel runs in a generator's `finally`, hung on the previous output: in a trial nothing else holds that
    output, so it runs inside forward; while timed, the judge holds the last output until the next call returned
    and lets it go after the clock stopped (a red-team solution, 2026-12-06: reward 3 under kernelbench). The
    static policy is off, so that the runtime check is what catches it under both policies."""
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
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", {"late_output_write"}), verdict.message
    assert "after forward returned" in verdict.message


def test_runtime_rejects_python_thread_started_in_forward(tmp_path: Path) -> None:
    forward = (
        "import threading\nimport time\n"
        "threading.Thread(target=time.sleep, args=(2.0,), daemon=True).start()\n"
        "return ext.relu(x.contiguous())"
    )
    verdict = judge_hack(tmp_path, "examples/relu", model_new(forward), static_policy=False)
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", {"background_thread"}), verdict.message


def test_late_write_check_sees_output_changed_after_the_call() -> None:
    """The late-write check itself, deterministically: the output changes while the reference runs."""
    import torch

    x = torch.randn(4, 8)
    out = torch.relu(x)

    def reference(inputs: torch.Tensor) -> torch.Tensor:
        out.add_(1.0)  # work the candidate left running lands now, after its call returned
        return torch.relu(inputs)

    req = SimpleNamespace(
        strict_precision=False, atol=1e-2, rtol=1e-2, norm_rtol=1e-2, precision_factor=16.0, precision_floor=5e-5
    )
    run = SimpleNamespace(
        torch=torch, req=req, reference=reference, reference64=None, sync=lambda: None, tick=lambda: None
    )
    trial = judge_trial(run, [x], [x.clone()], out, 1, "identity", "trial")
    assert (trial["ok"], trial.get("violation")) == (False, "late_output_write")
