"""Threat 15: changing process-wide state (backend flags, seeds, thread counts, operator registrations).

The static policy's cases come first, then the runtime defences with the judge end to end.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.judge import JudgeConfig, judge
from cuda_agent.judge.solution import SolutionSource
from cuda_agent.tasks import Catalog
from tests.judge.threats._hacks import CALLS_BEFORE_TIMING, TIMED, checks_of, judge_hack, model_new
from tests.judge.threats._static import checks, expect, solution


def test_template_is_legit() -> None:
    assert checks(solution()) == set()


@pytest.mark.parametrize(
    "prelude",
    [
        "torch.backends.cudnn.benchmark = True",
        "torch.manual_seed(0)",
        "torch.set_num_threads(1)",
        "torch.set_default_dtype(torch.float64)",
        "torch.use_deterministic_algorithms(False)",
        "torch.cuda.set_per_process_memory_fraction(0.5)",
        "torch.random.manual_seed(1)",
        "lib = torch.library.Library('aten', 'IMPL')",
    ],
    ids=["cudnn_benchmark", "seed", "threads", "default_dtype", "deterministic", "memory", "random", "library"],
)
def test_rejects_global_state_in_python(prelude: str) -> None:
    assert checks(solution(prelude=prelude)) == expect({"global_state_change"})


@pytest.mark.parametrize(
    "launch", ["omp_set_num_threads(1);", "cudaDeviceReset();", "cudaDeviceSetCacheConfig(cudaFuncCachePreferL1);"]
)
def test_rejects_global_state_in_cpp(launch: str) -> None:
    assert checks(solution(launch=launch)) == expect({"global_state_change"})


def test_rejects_torch_context_flags_in_cpp() -> None:
    source = solution(launch="at::globalContext().setAllowTF32CuBLAS(true);")
    assert checks(source) == expect({"global_state_change", "cpp_torch_compute"})


def test_rejects_overriding_aten_kernels() -> None:
    assert checks(solution(headers="TORCH_LIBRARY_IMPL(aten, CUDA, m) { }")) == expect({"global_state_change"})


@pytest.mark.parametrize(
    ("headers", "launch", "cuda_agent"),
    [
        ("", "c10::SetCPUAllocator(nullptr);", {"global_state_change"}),
        ("struct Hook : c10::Allocator { };", "", {"global_state_change"}),
        ("struct Hook final : public c10::Allocator { };", "", {"global_state_change"}),
        ("", "c10::DataPtr p;", {"global_state_change"}),
        ("", "at::addGlobalCallback(nullptr);", {"global_state_change", "cpp_torch_compute"}),
    ],
    ids=["set_cpu_allocator", "allocator_subclass", "allocator_subclass_final", "data_ptr", "op_callback"],
)
def test_rejects_hooks_that_run_inside_the_judges_work_in_cpp(headers: str, launch: str, cuda_agent: set) -> None:
    """Red team, 2026-12-06: a wrapped CPU allocator ran the whole computation on the judge's first allocation
    after the clock stopped (reward 3, both policies); a storage deleter ran it when the judge let an output go."""
    source = solution(headers=headers, launch=launch or "")
    assert checks(source) == expect(cuda_agent, {"global_state_change"})


@pytest.mark.parametrize(
    "prelude",
    [
        "torch.cuda.memory.change_current_allocator(None)",
        "M = torch.cuda.memory\nM.change_current_allocator(None)",
        "p = torch.cuda.MemPool()",
        "prof = torch.profiler.profile()",
        "T = torch\nT.set_num_threads(4)",
        "M = torch.cuda\nM.set_sync_debug_mode(1)",
    ],
    ids=["change_allocator", "change_allocator_alias", "mem_pool", "profiler", "alias_threads", "alias_cuda"],
)
def test_rejects_allocators_profilers_and_state_changes_through_an_alias(prelude: str) -> None:
    assert checks(solution(prelude=prelude)) == expect({"global_state_change"})


def test_a_name_bound_to_two_modules_is_checked_as_each_and_a_parameter_shadows_one() -> None:
    assert checks(solution(prelude="T = nn\nT = torch\nT.set_num_threads(4)")) == expect({"global_state_change"})
    assert checks(solution(prelude="M = torch.cuda\nM = torch.cuda.memory\nM.change_current_allocator(None)")) == (
        expect({"global_state_change"})
    )
    # Honest choices between torch names stay legal; forward's `x` is its own, whatever a module-level `x` holds.
    assert checks(solution(prelude="act = nn.ReLU\nact = nn.GELU")) == set()
    assert checks(solution(prelude="x = torch.float32")) == set()


# Runtime: the judge end to end on the CPU, sharing one build of the hack extension (see _hacks.py).


@pytest.mark.slow
def test_runtime_rejects_default_dtype_set_from_native_code(tmp_path: Path) -> None:
    # relu_set_default_dtype calls c10::set_default_dtype(float64), which no static rule names.
    verdict = judge_hack(tmp_path, "examples/relu", model_new("return ext.relu_set_default_dtype(x.contiguous())"))
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", {"global_state_changed"}), verdict.message
    assert "default_dtype" in verdict.message


@pytest.mark.parametrize(
    ("init", "forward", "flag"),
    [
        ("torch.backends.cudnn.benchmark = True", "", "cudnn_benchmark"),
        ("", "torch.set_num_threads(torch.get_num_threads() + 1)\n", "num_threads"),
    ],
    ids=["backend_flag_in_init", "num_threads_in_forward"],
)
def test_runtime_rejects_global_state_changed_in_python(tmp_path: Path, init: str, forward: str, flag: str) -> None:
    source = model_new(forward + "return ext.relu(x.contiguous())", init=init)
    verdict = judge_hack(tmp_path, "examples/relu", source, static_policy=False)
    # More intra-op threads than the judge set also grow torch's OpenMP team: the census may see the new threads.
    assert verdict.verdict == "rejected" and verdict.violations[0].check == "global_state_changed", verdict.message
    assert checks_of(verdict) <= {"global_state_changed", "background_thread"}
    assert flag in verdict.message


# Runtime, with the static policy off: an allocator of the solution's own, whatever spelling installs it.

ALLOCATOR_HOOK = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <torch/extension.h>
#include <c10/core/CPUAllocator.h>
#include <cstring>

// Hands out torch's own memory: harmless in itself, but its allocate() would run inside every CPU allocation the
// judge makes (red team round 8 computed the output there, after the clock stopped).
struct Wrapping final : c10::Allocator {
    c10::Allocator* inner;
    explicit Wrapping(c10::Allocator* a) : inner(a) {}
    c10::DataPtr allocate(size_t n) override { return inner->allocate(n); }
    c10::DeleterFnPtr raw_deleter() const override { return inner->raw_deleter(); }
    void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
};

static int64_t calls = 0;

void install() {
    static Wrapping hook(c10::GetCPUAllocator());
    c10::SetCPUAllocator(&hook, 0);
}

// ReLU; on call number `at` (1-based), installs the wrapper first.
torch::Tensor relu_install_at(torch::Tensor x, int64_t at) {
    if (++calls == at) install();
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}
"""

ext = load_inline(
    name="judge_threat_allocator_hook",
    cpp_sources=SOURCE,
    functions=["install", "relu_install_at"],
    extra_cflags=["-O3"],
    verbose=False,
)
'''


@pytest.mark.parametrize(
    ("where", "at"),
    [("ext.install()\n", 0), ("", 1), ("", CALLS_BEFORE_TIMING + 1)],
    ids=["at_import", "in_first_call", "in_first_timed_call"],
)
@pytest.mark.slow
def test_runtime_an_allocator_of_the_solutions_own_reaches_no_judge_code(tmp_path: Path, where: str, at: int) -> None:
    # The static policy refuses SetCPUAllocator by name (test above). With it off, the wrapper runs inside every CPU
    # allocation of the candidate's own process, and no other: the grader allocates the inputs, the reference's
    # outputs and the comparisons in its own process. The kernel is honest, so the verdict is its honest pass.
    source = ALLOCATOR_HOOK + where + "\n\n" + model_new(f"return ext.relu_install_at(x.contiguous(), {at})")
    config = JudgeConfig(device="cpu", static_policy=False, **TIMED)
    verdict = judge(Catalog().resolve("examples/relu"), SolutionSource(python=source), config)
    assert (verdict.verdict, verdict.correct) == ("pass", True), verdict.message
