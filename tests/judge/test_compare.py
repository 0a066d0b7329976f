"""The output comparison: elementwise, normwise and precision checks, on plain tensors."""

from __future__ import annotations

import torch

from cuda_agent.judge.compare import check_output

STRICT = {
    "atol": 1e-2,
    "rtol": 1e-2,
    "norm_rtol": 1e-2,
    "strict_precision": True,
    "precision_factor": 10.0,
    "precision_floor": 1e-5,
}


def test_zeros_for_wide_softmax_pass_allclose_but_fail_normwise() -> None:
    x = torch.randn(4, 393_216)
    ref = torch.softmax(x, dim=-1)
    zeros = torch.zeros_like(ref)
    assert torch.allclose(zeros, ref, atol=1e-2, rtol=1e-2)  # the paper's check alone is fooled
    check = check_output(zeros, ref, None, **STRICT)
    assert not check.ok and "normwise" in check.reason


def test_exact_output_passes_with_figures() -> None:
    ref = torch.randn(64, 64)
    check = check_output(ref.clone(), ref, ref.double(), **STRICT)
    assert check.ok and check.max_abs_err == 0 and check.norm_rel_err == 0


def _tf32(x: torch.Tensor) -> torch.Tensor:
    """Round float32 to TF32's 10-bit mantissa, as tensor cores do to matmul inputs."""
    return (x.view(torch.int32) & ~0x1FFF).view(torch.float32)


def test_tf32_matmul_rejected_as_reduced_precision_in_strict_mode() -> None:
    a, b = torch.randn(128, 64), torch.randn(64, 128)
    ref64 = a.double() @ b.double()
    ref = a @ b
    low = _tf32(a) @ _tf32(b)
    check = check_output(low, ref, ref64, **STRICT)
    assert not check.ok and check.precision
    assert check_output(low, ref, ref64, **{**STRICT, "strict_precision": False}).ok


def test_fp32_reordered_sum_is_accepted() -> None:
    x = torch.randn(128, 4096)
    ref64 = x.double().sum(dim=1)
    ref = x.sum(dim=1)
    reordered = x.view(128, 64, 64).sum(dim=2).sum(dim=1)  # another legit fp32 summation order
    assert check_output(reordered, ref, ref64, **STRICT).ok


def test_shape_dtype_and_subclass_mismatches_fail() -> None:
    ref = torch.randn(8, 8)

    class Lazy(torch.Tensor):
        pass

    assert "shape" in check_output(torch.randn(8, 9), ref, None, **STRICT).reason
    assert "dtype" in check_output(ref.double(), ref, None, **STRICT).reason
    assert "plain torch.Tensor" in check_output(ref.as_subclass(Lazy), ref, None, **STRICT).reason


def test_nan_where_reference_is_finite_fails() -> None:
    ref = torch.randn(100)
    out = ref.clone()
    out[3] = float("nan")
    assert not check_output(out, ref, None, **STRICT).ok
