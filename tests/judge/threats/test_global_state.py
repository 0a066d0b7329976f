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
