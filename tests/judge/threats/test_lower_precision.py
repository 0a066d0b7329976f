"""Threat 13: fp16/bf16/tf32/fp8 computation in a float32 task (static and runtime)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.judge.threats._hacks import (
    JUDGED_IN_THE_TIMED_PHASE,
    ROUND10_WHEN_TIMED,
    TIMED,
    checks_of,
    failed_check,
    judge_hack,
    model_new,
)
from tests.judge.threats._static import LAUNCH, checks, expect, solution


def test_template_is_legit() -> None:
    assert checks(solution()) == set()


WMMA = "nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, {k}, {type}, nvcuda::wmma::row_major> a;"
MMA_TF32 = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0}, {%1}, {%2}, {%3};"


@pytest.mark.parametrize(
    ("headers", "launch"),
    [
        ("#include <cuda_fp16.h>", "__half h = __float2half(1.f);"),
        ("#include <cuda_bf16.h>", "__nv_bfloat16 b = __float2bfloat16(1.f);"),
        ("#include <mma.h>", WMMA.format(k=16, type="half")),
        ("#include <mma.h>", WMMA.format(k=8, type="nvcuda::wmma::precision::tf32")),
        ("", f'asm volatile("{MMA_TF32}" : "=f"(d) : "r"(a), "r"(b), "f"(c));'),
        ("", 'asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(t) : "f"(v));'),
        ("#include <cublas_v2.h>", "cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH);"),
        ("#include <cublas_v2.h>", "cublasComputeType_t t = CUBLAS_COMPUTE_32F_FAST_16F;"),
        ("", "at::Half h = 1.f;"),
    ],
    ids=["half", "bf16", "wmma_half", "wmma_tf32", "ptx_mma", "ptx_cvt", "cublas_tf32", "cublas_fast16", "at_half"],
)
def test_rejects_reduced_precision_in_cpp(headers: str, launch: str) -> None:
    assert checks(solution(headers=headers, launch=launch)) == expect({"precision_downcast"})


def test_rejects_half_in_python() -> None:
    forward = "return ext.relu_forward(x.half())"
    assert checks(solution(forward=forward)) == expect({"precision_downcast", "torch_compute_in_forward"})
    init = "def __init__(self):\n    super().__init__()\n    self.dtype = torch.bfloat16\n"
    assert checks(solution(init=init)) == expect({"precision_downcast"})


def test_rejects_tf32_flag() -> None:
    source = solution(prelude="torch.backends.cuda.matmul.allow_tf32 = True")
    assert checks(source) == expect({"precision_downcast", "global_state_change"})


def test_accepts_half_in_a_half_task() -> None:
    source = solution(headers="#include <cuda_fp16.h>", launch="__half h = __float2half(1.f);")
    assert checks(source, task_dtypes={"torch.float16"}) == set()


REDUCTION = """
__device__ float block_sum(float* s, int tid) {
    for (int half = blockDim.x / 2; half > 0; half >>= 1) {
        if (tid < half) s[tid] += s[tid + half];
        __syncthreads();
    }
    return s[0];
}
__device__ void point(int *half, int &twice) { *half = twice * 2; }
__global__ void halves(float* y, int64_t half) { if (threadIdx.x < half) y[threadIdx.x] *= (float)(half * 2); }
struct Split { int half; };
__device__ int twice(Split a, Split* b) { return a.half * 2 + b->half * 2 + max(a.half, b->half); }
"""


@pytest.mark.parametrize(
    ("headers", "launch", "init"),
    [
        ("", "const int64_t half = n / 2; (void)half;", ""),
        ("", "const int64_t half = n / 2;\n" + LAUNCH.replace("(n + 255)", "(half * 2 + 255)"), ""),
        (REDUCTION, LAUNCH, ""),
        (
            "",
            LAUNCH,
            "def __init__(self):\n    super().__init__()\n    self.half = 4\n    self.bfloat16 = self.half // 2\n",
        ),
    ],
    ids=["declared", "multiplied_and_passed", "loop_parameter_member", "python_attribute"],
)
def test_half_as_a_name_is_not_precision(headers: str, launch: str, init: str) -> None:
    """A variable, parameter or member named `half` is what it is bound to, not cuda_fp16.h's type."""
    forward = "n = self.half * self.bfloat16\nreturn ext.relu_forward(x.contiguous()).view(-1)[:n]" if init else ""
    source = solution(headers=headers, launch=launch, init=init, forward=forward)
    assert checks(source) == set()


@pytest.mark.parametrize(
    "headers",
    [
        "__device__ void g() { if (1) { int half = 1; (void)half; } half* p = nullptr; (void)p; }",
        "__device__ void g(float* s) { for (int half = 0; half < 2; ++half) s[half] = 0; half* p = 0; (void)p; }",
        "__device__ int g(int half) { return half; }\n__device__ void h() { half* p = nullptr; (void)p; }",
        "__device__ void g() { int half = 1; ::half* p = nullptr; (void)p; (void)half; }",
        "#if 0\nint half = 0;\n#endif\n__device__ void g() { half* p = nullptr; (void)p; }",
        "#define DECLARE int half = 0;\n__device__ void g() { half* p = nullptr; (void)p; }",
        "void f(int half);\n__device__ void g() { half* p = nullptr; (void)p; }",
        "using H = half;",
        "typedef half H;",
        "__device__ void g() { auto h = (half)1.0f; (void)h; }",
        "__device__ void g(at::Tensor t) { auto p = reinterpret_cast<half*>(t.data_ptr()); (void)p; }",
    ],
    ids=[
        "after_block",
        "after_loop",
        "other_function",
        "qualified",
        "if_0",
        "macro",
        "prototype",
        "using",
        "typedef",
        "cast",
        "reinterpret",
    ],
)
def test_half_type_beside_a_half_variable_is_precision(headers: str) -> None:
    """Where no variable named `half` is in scope, or the type is qualified, `half` is still cuda_fp16.h's type."""
    assert checks(solution(headers="#include <cuda_fp16.h>\n" + headers)) == expect({"precision_downcast"})


@pytest.mark.parametrize(
    "forward",
    [
        "return ext.relu_forward(x.to(torch.half))",
        "h = x.half\nreturn ext.relu_forward(h())",
        "self.half()\nreturn ext.relu_forward(x)",
    ],
    ids=["to_half", "method_reference", "module_half"],
)
def test_rejects_half_conversions_in_python(forward: str) -> None:
    init = "def __init__(self):\n    super().__init__()\n    if False:\n        self.half = 0\n"
    assert checks(solution(init=init, forward=forward)) == expect({"precision_downcast", "torch_compute_in_forward"})


# Runtime: the judge end to end on the CPU, sharing one build of the hack extension (see _hacks.py).


ROUND10 = model_new("return ext.relu_round10(x.contiguous())")


@pytest.mark.slow
def test_runtime_rejects_precision_lost_without_fp16_types(tmp_path: Path) -> None:
    """relu_round10 rounds x to a 10-bit mantissa (fp16/TF32 precision) with integer bit operations.

    Eager fp32 relu is exact, so the strict bound is the 5e-5 floor; the rounding error (about
    2e-4 normwise) exceeds it while every element stays within rtol = 1e-2 of the reference.
    """
    verdict = judge_hack(tmp_path, "examples/relu", ROUND10)
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", {"reduced_precision"}), verdict.message


@pytest.mark.slow
def test_runtime_accepts_the_same_precision_loss_in_paper_mode(tmp_path: Path) -> None:
    verdict = judge_hack(tmp_path, "examples/relu", ROUND10, precision="paper")
    assert (verdict.verdict, verdict.correct) == ("pass", True), verdict.message


def test_runtime_rejects_precision_lost_only_while_timed(tmp_path: Path) -> None:
    """Exact in every trial (where the float64 reference is), rounded to 10 bits in the first 150 of the timed
    phase's 200 calls (this relu is fast: the phase makes its most calls, so the last timed call and the recheck
    after it are known, and exact). The timed outputs are judged against the float32 reference alone, within
    rtol; an error beyond what the trials' precision bound allows, against float32, shows it (or the watched call
    placed before one of the first timed ones, judged against float64 as a trial is)."""
    verdict = judge_hack(tmp_path, "examples/relu", ROUND10_WHEN_TIMED, **TIMED)
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", {"reduced_precision"}), verdict.message
    assert failed_check(verdict)["label"] in JUDGED_IN_THE_TIMED_PHASE, verdict.checks[-1]


@pytest.mark.slow
def test_runtime_accepts_precision_lost_only_while_timed_in_paper_mode(tmp_path: Path) -> None:
    verdict = judge_hack(tmp_path, "examples/relu", ROUND10_WHEN_TIMED, precision="paper", **TIMED)
    assert (verdict.verdict, verdict.correct) == ("pass", True), verdict.message
