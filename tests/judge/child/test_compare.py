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
    assert str(check.max_abs_err) == "0.0"  # not -0.0: the figure is a maximum of absolute values


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
    specials = ref.clone()  # NaN and inf where the reference has them too: elementwise equal, nan_to_num'd norms
    specials[5, 7], specials[60, 1], specials[90, 69] = float("nan"), float("inf"), -float("inf")
    inf_for_finite, flipped_inf = ref.clone(), specials.clone()
    inf_for_finite[10, 10] = float("inf")
    flipped_inf[60, 1] = -float("inf")
    zeros = torch.relu(ref)
    signed_zeros = zeros.clone()
    signed_zeros[zeros == 0] = -0.0  # the same values, other bits
    large = ref * 1e4  # differences beyond atol, within rtol: isclose decides, not the shortcut
    return [
        ("exact", ref.clone(), ref, ref64),
        ("reordered", a[:, :20] @ b[:20] + a[:, 20:] @ b[20:], ref, ref64),
        ("tf32", _tf32(a) @ _tf32(b), ref, ref64),
        ("wrong", wrong, ref, ref64),
        ("nan", nan, ref, None),
        ("zeros_softmax", torch.zeros_like(soft), soft, None),
        ("transposed", ref.t().contiguous().t(), ref, ref64),  # non-contiguous layout, same values
        ("specials", specials.clone(), specials, None),
        ("inf_for_finite", inf_for_finite, ref, None),
        ("flipped_inf", flipped_inf, specials, None),
        ("nan_in_reference", ref, nan, None),
        ("signed_zeros", signed_zeros, zeros, zeros.double()),
        ("large_within_rtol", large * (1 + 1e-5), large, None),
        ("large_beyond_rtol", large * (1 + 5e-2), large, None),
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
        "specials": True,
        "inf_for_finite": False,
        "flipped_inf": False,
        "nan_in_reference": False,
        "signed_zeros": True,
        "large_within_rtol": True,
        "large_beyond_rtol": False,
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


_BITS = {
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
    torch.float32: torch.int32,
    torch.float64: torch.int64,
}


@pytest.mark.parametrize("dtype", list(_BITS))
def test_same_values_compares_values_where_bits_differ(dtype: torch.dtype) -> None:
    a = torch.tensor([0.0, 1.5, float("nan"), float("inf"), -2.0] * 5, dtype=dtype)
    b = a.clone()
    b[0] = -0.0  # the same value, another sign bit
    b.view(_BITS[dtype])[2] |= 1  # another NaN payload
    assert b[2].isnan() and not torch.equal(a.view(_BITS[dtype]), b.view(_BITS[dtype]))
    assert same_values(a, b, chunk_elems=3) and same_values(a, a.clone(), chunk_elems=3)
    late = b.clone()
    late[-1] = 7.0  # past the last chunk boundary
    assert not same_values(a, late, chunk_elems=3)
    nan_for_number = a.clone()
    nan_for_number[6] = float("nan")
    assert not same_values(a, nan_for_number, chunk_elems=3)
    grid = a.reshape(5, 5)
    assert same_values(grid.t(), b.reshape(5, 5).t(), chunk_elems=3)  # non-contiguous
    assert not same_values(grid.t(), late.reshape(5, 5).t(), chunk_elems=3)


def test_same_values_on_integers_and_empty_tensors() -> None:
    a = torch.arange(20)
    b = a.clone()
    assert same_values(a, b, chunk_elems=6)
    b[13] = -1
    assert not same_values(a, b, chunk_elems=6)
    assert same_values(torch.empty(0, 3), torch.empty(0, 3)) and not same_values(torch.empty(0, 3), torch.empty(3, 0))


def test_integer_and_empty_outputs() -> None:
    ref = torch.arange(30).reshape(5, 6)
    changed = ref.clone()
    changed[4, 5] = 0
    assert check_output(ref.clone(), ref, None, chunk_elems=7, **STRICT).ok
    assert "integer" in check_output(changed, ref, None, chunk_elems=7, **STRICT).reason
    assert check_output(torch.empty(0, 4), torch.empty(0, 4), torch.empty(0, 4).double(), **STRICT).ok


@pytest.mark.parametrize("dtype", list(_BITS))
@pytest.mark.parametrize(("base", "rtol"), [(0.0, 0.0), (0.0, 1e-2), (0.5, 1e-2), (-3.0, 0.0)])
def test_differences_near_atol_are_judged_as_isclose_judges_them(dtype: torch.dtype, base: float, rtol: float) -> None:
    """Differences from a few steps below atol to a few above, in the output's dtype: those at most atol take the
    shortcut (no isclose), the others isclose; the mismatch fraction and verdict must be isclose's either way."""
    up, down = torch.tensor(float("inf"), dtype=dtype), torch.tensor(-float("inf"), dtype=dtype)
    ref = torch.tensor(base, dtype=dtype)
    out, below, above = [], ref + torch.tensor(1e-2, dtype=dtype), ref + torch.tensor(1e-2, dtype=dtype)
    for _ in range(4):
        out += [below, above]
        below, above = torch.nextafter(below, down), torch.nextafter(above, up)
    for value in out:
        one, refs = value.reshape(1).repeat(3), ref.reshape(1).repeat(3)
        tol = {**STRICT, "rtol": rtol, "strict_precision": False}
        check = check_output(one, refs, None, chunk_elems=2, **tol)
        close = torch.isclose(one, refs, atol=1e-2, rtol=rtol)
        assert check.mismatch_fraction == 1.0 - float(close.double().mean()), float(value)
        assert check.ok == bool(close.all()) or "normwise" in check.reason, float(value)


class _OpNames(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def test_outputs_within_atol_and_finite_take_one_float64_pass() -> None:
    ref = torch.randn(256, 1024)
    out = ref + 1e-4 * torch.randn_like(ref)
    elementwise = {"isnan", "le", "eq", "nan_to_num"}  # isclose's and isfinite's operators, and nan_to_num
    ref64 = (out.double() + ref.double()) / 2  # both as far from float64 as each other: a pass
    with _OpNames() as log:
        assert check_output(out, ref, ref64, chunk_elems=1 << 16, **STRICT).ok
    assert not elementwise & log.names, log.names
    large = ref * 1e4
    with _OpNames() as log:  # beyond atol, within rtol: isclose decides
        assert check_output(large * (1 + 1e-5), large, None, chunk_elems=1 << 16, **STRICT).ok
    assert {"isnan", "le"} <= log.names and "nan_to_num" not in log.names, log.names
    nan = out.clone()
    nan[3, 3] = float("nan")
    with _OpNames() as log:  # a NaN: the full comparison, which fails it
        assert not check_output(nan, ref, None, chunk_elems=1 << 16, **STRICT).ok
    assert {"isnan", "le", "nan_to_num"} <= log.names, log.names


class _Liar(torch.Tensor):
    """What a solution could make its overwritten input in place (`x.__class__ = _Liar`): it answers `!=` with none."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN206
        if getattr(func, "__name__", "") == "ne":
            return torch.zeros(args[0].shape, dtype=torch.bool)
        return super().__torch_function__(func, types, args, kwargs or {})


def test_same_values_never_asks_a_tensor_whose_class_was_swapped() -> None:
    original = torch.randn(64)
    handed = original.clone()
    handed.fill_(0.0)
    handed.__class__ = _Liar
    assert (original.view(torch.int32) != handed.view(torch.int32)).sum() == 0  # how it would have answered
    assert not same_values(original, handed) and not same_values(handed, original)
