"""Threat 15: changing process-wide state (backend flags, seeds, thread counts, operator registrations).

The static policy's cases come first, then the runtime defences with the judge end to end.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.judge.threats._hacks import checks_of, judge_hack, model_new
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
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", {"global_state_changed"}), verdict.message
    assert flag in verdict.message
