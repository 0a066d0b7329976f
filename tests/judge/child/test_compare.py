"""The output comparison: elementwise, normwise and precision checks, on plain tensors."""

from __future__ import annotations

import pytest
import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from cuda_agent.judge.child.compare import check_output, same_values

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


def _unchunked(out: torch.Tensor, ref: torch.Tensor, ref64: torch.Tensor | None, **tol) -> dict:
    """The whole-tensor comparison the judge used before chunking (the oracle for the chunked one)."""

    def norm_rel(a: torch.Tensor, b: torch.Tensor) -> float:
        diff = torch.linalg.vector_norm((a.double() - b.double()).flatten())
        base = torch.linalg.vector_norm(b.double().flatten())
        return (0.0 if diff == 0 else float("inf")) if base == 0 else float(diff / base)

    close = torch.isclose(out, ref, atol=tol["atol"], rtol=tol["rtol"], equal_nan=True)
    finite = torch.isfinite(out) == torch.isfinite(ref)
    figures = {
        "mismatch_fraction": 1.0 - float(close.double().mean()),
        "max_abs_err": float((out.double() - ref.double()).abs().nan_to_num(nan=float("inf")).max()),
        "norm_rel_err": norm_rel(out.nan_to_num(), ref.nan_to_num()),
    }
    good = close & finite
    bad = (~good).nonzero()
    figures["first_mismatch"] = str([int(i) for i in bad[0]]) if bad.numel() else ""
    if ref64 is not None:
        figures["err_vs_fp64"], figures["eager_err_vs_fp64"] = norm_rel(out, ref64), norm_rel(ref, ref64)
    figures["ok_elementwise"] = bool(good.all())
    return figures


def _cases() -> list[tuple[str, torch.Tensor, torch.Tensor, torch.Tensor | None]]:
    gen = torch.Generator().manual_seed(7)
    a, b = torch.randn(96, 40, generator=gen), torch.randn(40, 70, generator=gen)
    ref64 = a.double() @ b.double()
    ref = a @ b
    wrong = ref.clone()
    wrong[50:, 13] += 1.0
    nan = ref.clone()
    nan[77, 3] = float("nan")
    x = torch.randn(3, 5000, generator=gen)
    soft = torch.softmax(x, dim=-1)
    return [
        ("exact", ref.clone(), ref, ref64),
        ("reordered", a[:, :20] @ b[:20] + a[:, 20:] @ b[20:], ref, ref64),
        ("tf32", _tf32(a) @ _tf32(b), ref, ref64),
        ("wrong", wrong, ref, ref64),
        ("nan", nan, ref, None),
        ("zeros_softmax", torch.zeros_like(soft), soft, None),
        ("transposed", ref.t().contiguous().t(), ref, ref64),  # non-contiguous layout, same values
    ]


@pytest.mark.parametrize("chunk_elems", [97, 1000, 1 << 24])
@pytest.mark.parametrize("strict", [True, False])
def test_chunked_comparison_equals_the_whole_tensor_one(chunk_elems: int, strict: bool) -> None:
    tol = {**STRICT, "strict_precision": strict}
    for name, out, ref, ref64 in _cases():
        whole = _unchunked(out, ref, ref64, **tol)
        check = check_output(out, ref, ref64, chunk_elems=chunk_elems, **tol)
        lone = check_output(out, ref, ref64, chunk_elems=1 << 30, **tol)  # one chunk: the verdict to match
        assert (check.ok, check.reason, check.precision) == (lone.ok, lone.reason, lone.precision), name
        assert check.mismatch_fraction == pytest.approx(whole["mismatch_fraction"], abs=1e-12), name
        assert check.max_abs_err == whole["max_abs_err"], name
        assert check.norm_rel_err == pytest.approx(whole["norm_rel_err"], rel=1e-9), name
        assert (check.first_mismatch.split(":")[0] == f"at {whole['first_mismatch']}") or not whole["first_mismatch"]
        if check.err_vs_fp64 is not None:
            assert check.err_vs_fp64 == pytest.approx(whole["err_vs_fp64"], rel=1e-9), name
            assert check.eager_err_vs_fp64 == pytest.approx(whole["eager_err_vs_fp64"], rel=1e-9), name
    verdicts = {name: check_output(o, r, r64, chunk_elems=chunk_elems, **tol).ok for name, o, r, r64 in _cases()}
    assert verdicts == {
        "exact": True,
        "reordered": True,
        "tf32": not strict,
        "wrong": False,
        "nan": False,
        "zeros_softmax": False,
        "transposed": True,
    }


class _AllocationLog(TorchDispatchMode):
    """Bytes of every new storage an operator returns (views of their inputs are not allocations)."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        inputs = {
            t.untyped_storage().data_ptr() for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)
        }
        for t in pytree.tree_leaves(result):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in inputs:
                self.sizes.append(t.untyped_storage().nbytes())
        return result


def test_the_comparison_allocates_chunks_not_whole_tensors() -> None:
    out = torch.randn(256, 4096)  # 1 Mi float32 elements: 4 MiB
    ref = out + 1e-4 * torch.randn(256, 4096)
    ref64 = (out.double() + ref.double()) / 2  # both as far from float64 as each other: a pass
    chunk = 1 << 16
    copy = out.clone()
    with _AllocationLog() as log:
        check = check_output(out, ref, ref64, chunk_elems=chunk, **STRICT)
        same = same_values(out, copy, chunk_elems=chunk)
    assert check.ok and check.err_vs_fp64 is not None and same
    assert len(log.sizes) > 16 * 4  # the work really went through the chunks...
    assert max(log.sizes) <= 8 * chunk  # ...and no temporary was larger than one float64 chunk
