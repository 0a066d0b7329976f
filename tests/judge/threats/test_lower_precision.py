"""Threat 13: fp16/bf16/tf32/fp8 computation in a float32 task (static and runtime)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.judge.threats._hacks import ROUND10_WHEN_TIMED, TIMED, checks_of, judge_hack, model_new
from tests.judge.threats._static import checks, expect, solution


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


def test_half_as_a_variable_name_is_not_precision() -> None:
    assert checks(solution(launch="const int64_t half = n / 2; (void)half;")) == set()


# Runtime: the judge end to end on the CPU, sharing one build of the hack extension (see _hacks.py).


ROUND10 = model_new("return ext.relu_round10(x.contiguous())")


def test_runtime_rejects_precision_lost_without_fp16_types(tmp_path: Path) -> None:
    """relu_round10 rounds x to a 10-bit mantissa (fp16/TF32 precision) with integer bit operations.

    Eager fp32 relu is exact, so the strict bound is the 5e-5 floor; the rounding error (about
    2e-4 normwise) exceeds it while every element stays within rtol = 1e-2 of the reference.
    """
    verdict = judge_hack(tmp_path, "examples/relu", ROUND10)
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", {"reduced_precision"}), verdict.message


def test_runtime_accepts_the_same_precision_loss_in_paper_mode(tmp_path: Path) -> None:
    verdict = judge_hack(tmp_path, "examples/relu", ROUND10, precision="paper")
    assert (verdict.verdict, verdict.correct) == ("pass", True), verdict.message


def test_runtime_rejects_precision_lost_only_while_timed(tmp_path: Path) -> None:
    """Exact in every trial (where the float64 reference is), rounded to 10 bits in the first 150 of the timed
    phase's 200 calls (this relu is fast: the phase makes its most calls, so the last timed call and the recheck
    after it are known, and exact). The timed outputs are judged against the float32 reference alone, within
    rtol; an error beyond what the trials' precision bound allows, against float32, shows it."""
    verdict = judge_hack(tmp_path, "examples/relu", ROUND10_WHEN_TIMED, **TIMED)
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", {"reduced_precision"}), verdict.message
    assert verdict.message.startswith("a timed call's output is wrong: "), verdict.message


def test_runtime_accepts_precision_lost_only_while_timed_in_paper_mode(tmp_path: Path) -> None:
    verdict = judge_hack(tmp_path, "examples/relu", ROUND10_WHEN_TIMED, precision="paper", **TIMED)
    assert (verdict.verdict, verdict.correct) == ("pass", True), verdict.message
