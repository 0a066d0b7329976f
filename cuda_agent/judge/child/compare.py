"""Correctness and precision figures for one output against its references, in bounded memory.

Three tests, all of which an output must pass:
1. elementwise `allclose(out, ref, atol, rtol)` as in the paper and KernelBench;
2. normwise `||out - ref|| <= norm_rtol * ||ref|| + tiny`, which fails outputs that pass (1) only
   because atol dwarfs the values (zeros for a 393,216-wide softmax pass (1), not this);
3. strict precision mode: for a float32 output, the candidate's normwise error against the
   float64 reference may be at most `precision_factor` times eager float32's, or
   `precision_floor`, or what plain-order float32 rounding allows over the reference's longest
   reduction (reduction.py), whichever is largest. fp16/bf16/TF32 arithmetic lands well above that.

Every figure is accumulated over chunks of `chunk_elems` elements (float64 upcasts per chunk),
so the judge's own temporaries stay a few chunks in size however large the output: whole-tensor
float64 copies of a 6.4 GB output once took 12 GB each and ran the H200 out of memory when two
judges shared it. The chunked figures equal the whole-tensor ones (sums of squares combined per
chunk, counts exact); see tests/judge/child/test_compare.py.

Every pass over a 6.4 GB output costs the judge milliseconds per trial on the GPU and far more on the CPU,
so the common case takes few passes: one loop computes the float64 difference once per chunk and
takes every figure from it (extremes, norms, and the float64-reference norms beside it), and the
elementwise and NaN/inf work of the old loops runs only where that loop cannot decide: a non-finite
value or a difference above atol (`check_output`). `same_values` compares bit patterns first and
compares values only where the bits differ. Each shortcut gives the figures and verdicts of the full
computation (tests/judge/child/test_compare.py holds both side by side; bench/compare_passes.py times them).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from cuda_agent.judge.child.reduction import rounding_allowance

CHUNK_ELEMS = 1 << 26
"""Elements per chunk: 64 Mi, so one float64 temporary is 512 MiB (a few are alive at once: about 2 GB, next to
the 12.8 GB that whole-tensor copies of a 6.4 GB output took) and an L1/19 output is 25 chunks. The sums stay
on the device until the end: one synchronisation per figure, not one per chunk."""


@dataclass
class OutputCheck:
    """Figures for one output tensor of one trial."""

    ok: bool
    reason: str
    precision: bool = False
    """True when the only failure is reduced precision (a policy rejection, not a wrong answer)."""
    max_abs_err: float | None = None
    mismatch_fraction: float | None = None
    norm_rel_err: float | None = None
    err_vs_fp64: float | None = None
    eager_err_vs_fp64: float | None = None
    precision_bound: float | None = None
    """The strict bound the candidate's error against float64 was held to (where it was)."""
    reduction_length: int | None = None
    """The reference's longest reduction, which the bound's float32 rounding allowance grew with (reduction.py)."""
    first_mismatch: str = ""
    """Where the first element outside the tolerance is, e.g. 'at [3, 17]: got 0.5, expected 1.25'."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _chunks(*tensors: Any, chunk_elems: int) -> Iterator[tuple[int, list[Any]]]:
    """(offset, [flat slice of each tensor]) over the elements in row-major order; slices are views."""
    flat = [t.reshape(-1) for t in tensors]  # a view unless the tensor is non-contiguous (then one copy)
    n = flat[0].numel()
    for start in range(0, n, chunk_elems):
        yield start, [f[start : start + chunk_elems] for f in flat]


def _norm(norms: list[Any]) -> float:
    """||x|| from the per-chunk norms (as torch combines them: overflow and NaN behave alike)."""
    return float(_norm_t(norms)) if norms else 0.0


def _norm_t(norms: list[Any]) -> Any:
    """`_norm` left on the device (so that several figures come back in one synchronisation)."""
    import torch

    return torch.linalg.vector_norm(torch.stack(norms))


def _ratio(diff: float, ref: float) -> float:
    if ref == 0:
        return 0.0 if diff == 0 else math.inf
    return diff / ref


def _norm_rel(a: Any, b: Any, chunk_elems: int, nan_to_num: bool = False) -> float:
    """||a - b|| / ||b|| in float64, chunk by chunk (`nan_to_num` first where asked)."""
    import torch

    diffs, refs = [], []
    for _, (x, y) in _chunks(a, b, chunk_elems=chunk_elems):
        if nan_to_num:
            x, y = x.nan_to_num(), y.nan_to_num()
        x, y = x.double(), y.double()
        diffs.append(torch.linalg.vector_norm(x - y))
        refs.append(torch.linalg.vector_norm(y))
    return _ratio(_norm(diffs), _norm(refs))


def _fits(ref64: Any, out: Any) -> bool:
    """Whether the float64 reference can join the difference pass (else it is compared on its own, as asked)."""
    import torch

    return type(ref64) is torch.Tensor and ref64.shape == out.shape and ref64.device == out.device


@dataclass
class _Differences:
    """What one float64 pass over out - ref gives (see `_difference_pass`)."""

    max_abs: float
    finite: bool
    """Every out - ref is finite, so out and ref are: no NaN or inf anywhere."""
    diff_norm: float
    ref_norm: float
    err_vs_fp64: float | None
    eager_err_vs_fp64: float | None


def _difference_pass(out: Any, ref: Any, ref64: Any | None, chunk_elems: int) -> _Differences:
    """max |out - ref|, ||out - ref||, ||ref|| in float64 and, given ref64, ||out - ref64|| / ||ref64|| and
    ||ref - ref64|| / ||ref64||, from one float64 upcast of each chunk; one synchronisation at the end.

    The arithmetic is the old separate passes' (same upcasts, same subtractions, same chunked norms), so the
    figures are theirs: max |d| is max(-min d, max d), which aminmax leaves NaN where any d is NaN."""
    import torch

    lows, highs, diffs, refs, errs, eagers, bases = [], [], [], [], [], [], []
    tensors = (out, ref) if ref64 is None else (out, ref, ref64)
    for _, chunk in _chunks(*tensors, chunk_elems=chunk_elems):
        o, r = chunk[0].double(), chunk[1].double()  # copies where sub_ is used below (float32 only)
        d = o - r
        low, high = torch.aminmax(d)
        lows.append(low)
        highs.append(high)
        diffs.append(torch.linalg.vector_norm(d))
        refs.append(torch.linalg.vector_norm(r))
        del d
        if ref64 is not None:
            t = chunk[2].double()  # a float64 chunk as it is: no copy
            bases.append(torch.linalg.vector_norm(t))
            errs.append(torch.linalg.vector_norm(o.sub_(t)))
            eagers.append(torch.linalg.vector_norm(r.sub_(t)))
    combined = [torch.stack(lows).min(), torch.stack(highs).max(), _norm_t(diffs), _norm_t(refs)]
    if ref64 is not None:
        combined += [_norm_t(errs), _norm_t(eagers), _norm_t(bases)]
    low, high, diff, base, *more = torch.stack(combined).tolist()
    finite = math.isfinite(low) and math.isfinite(high)
    # the old figure was |d|.nan_to_num(nan=inf).max(), whose nan_to_num also turned an infinite |d| into the
    # largest float64: NaN reads inf, inf reads 1.8e308, as before (abs: max(-0.0, 0.0) is -0.0, |d| never is)
    max_abs = math.inf if math.isnan(low) or math.isnan(high) else min(abs(max(-low, high)), sys.float_info.max)
    err = eager = None
    if more:
        err, eager = _ratio(more[0], more[2]), _ratio(more[1], more[2])
    return _Differences(max_abs, finite, diff, base, err, eager)


_FLOOR_DTYPES = ("float16", "bfloat16", "float32", "float64")


def _atol_floor(atol: float, dtype: Any) -> float | None:
    """The largest value of `dtype` at most atol, or None where no shortcut is taken (a negative atol: isclose
    refuses it; a dtype outside _FLOOR_DTYPES).

    isclose's bound is atol + |rtol * ref| rounded in float32 or the dtype, which is at least this
    floor; |out - ref| rounded to the dtype is at most the floor where the float64 |out - ref| is."""
    import torch

    if atol < 0 or dtype not in [getattr(torch, name) for name in _FLOOR_DTYPES]:
        return None
    floor = torch.tensor(atol, dtype=torch.float64).to(dtype)
    if float(floor) > atol:
        floor = torch.nextafter(floor, torch.tensor(-math.inf, dtype=dtype))
    return float(floor)


def _elementwise(out: Any, ref: Any, atol: float, rtol: float, finite: bool, chunk_elems: int) -> tuple[float, bool]:
    """(fraction of elements not isclose, whether out and ref are finite at the same places): the full check, less
    the isfinite counts where the difference pass found every value `finite`."""
    import torch

    close_count = torch.zeros((), dtype=torch.int64, device=out.device)
    finite_differs = torch.zeros((), dtype=torch.int64, device=out.device)
    for _, (o, r) in _chunks(out, ref, chunk_elems=chunk_elems):
        close_count += torch.isclose(o, r, atol=atol, rtol=rtol, equal_nan=True).sum()
        if not finite:
            finite_differs += (torch.isfinite(o) != torch.isfinite(r)).sum()
    return 1.0 - int(close_count) / out.numel(), int(finite_differs) == 0


_BITS = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}
"""Integer dtypes of each floating element size, to compare bit patterns in one kernel."""


def same_values(a: Any, b: Any, chunk_elems: int = CHUNK_ELEMS) -> bool:
    """Whether two tensors hold the same values (NaN where the other has NaN), in bounded memory.

    Equal bit patterns are equal values, and a copy has its original's bits, so floating tensors are
    compared as integers first; only where some bits differ (a real change, -0.0 against 0.0, another
    NaN payload) are the values compared, with NaN matching NaN.
    """
    import torch

    if type(a) is not type(b):  # one made a subclass in place (`x.__class__ = ...`) would answer this comparison
        return False
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() and a.element_size() in _BITS:
        bits = getattr(torch, _BITS[a.element_size()])
        differ = torch.zeros((), dtype=torch.int64, device=a.device)
        for _, (x, y) in _chunks(a, b, chunk_elems=chunk_elems):
            differ += (x.view(bits) != y.view(bits)).sum()
        if int(differ) == 0:
            return True
    return _same_by_value(a, b, chunk_elems)


def _same_by_value(a: Any, b: Any, chunk_elems: int) -> bool:
    import torch

    differ = torch.zeros((), dtype=torch.int64, device=a.device)
    for _, (x, y) in _chunks(a, b, chunk_elems=chunk_elems):
        if x.is_floating_point() or x.is_complex():
            differ += (x.isnan() != y.isnan()).sum() + (x.nan_to_num() != y.nan_to_num()).sum()
        else:
            differ += (x != y).sum()
    return int(differ) == 0


def _first_bad(out: Any, ref: Any, atol: float, rtol: float, chunk_elems: int) -> str:
    """Where the first element outside the tolerance (or finite where the other is not) is; a second pass, run
    only for a failing output."""
    import torch

    for offset, (o, r) in _chunks(out, ref, chunk_elems=chunk_elems):
        good = torch.isclose(o, r, atol=atol, rtol=rtol, equal_nan=True) & (torch.isfinite(o) == torch.isfinite(r))
        if not bool(good.all()):
            return _first_mismatch(out, ref, offset, good)
    return ""


def _first_mismatch(out: Any, ref: Any, offset: int, good: Any) -> str:
    bad = (~good).nonzero()
    flat, index = offset + int(bad[0, 0]), []
    for size in reversed(out.shape):  # row-major unravel of the flat position
        flat, i = divmod(flat, size)
        index.insert(0, i)
    at = tuple(index)
    return f"at {index}: got {float(out[at]):.6g}, expected {float(ref[at]):.6g}"


def check_output(
    out: Any,
    ref: Any,
    ref64: Any | None,
    *,
    atol: float,
    rtol: float,
    norm_rtol: float,
    strict_precision: bool,
    precision_factor: float,
    precision_floor: float,
    reduction_length: int = 1,
    chunk_elems: int = CHUNK_ELEMS,
) -> OutputCheck:
    """Compare one candidate output with the eager reference (and the float64 one when given).

    Args:
        out, ref: the candidate's and the reference's output (same shape, dtype, device expected).
        ref64: the reference computed in float64, or None (no precision check).
        atol, rtol: elementwise tolerances; norm_rtol: the normwise bound.
        strict_precision, precision_factor, precision_floor: the strict precision mode (module docstring).
        reduction_length: the reference's longest reduction (reduction.py): the bound allows float32 rounding over it.
        chunk_elems: elements per chunk; the judge's temporaries are a few chunks (float64) in size.
    """
    import torch

    if type(out) is not torch.Tensor:
        return OutputCheck(False, f"output is {type(out).__name__}, not a plain torch.Tensor")
    if out.shape != ref.shape:
        return OutputCheck(False, f"shape {tuple(out.shape)} != expected {tuple(ref.shape)}")
    if out.dtype != ref.dtype:
        return OutputCheck(False, f"dtype {out.dtype} != expected {ref.dtype}")
    if out.device.type != ref.device.type:
        return OutputCheck(False, f"device {out.device.type} != expected {ref.device.type}")
    if not ref.is_floating_point():
        same = same_values(out, ref, chunk_elems)
        return OutputCheck(same, "" if same else "integer/bool output differs from the reference")
    if out.numel() == 0:
        return OutputCheck(True, "")
    with64 = ref64 is not None and out.dtype == torch.float32 and _fits(ref64, out)
    figures = _difference_pass(out, ref, ref64 if with64 else None, chunk_elems)
    max_abs = figures.max_abs
    floor = _atol_floor(atol, out.dtype)
    if figures.finite and floor is not None and rtol >= 0 and max_abs <= floor:
        mismatch, all_finite = 0.0, True  # every |out - ref| <= atol <= isclose's bound: all elements are close
    else:
        mismatch, all_finite = _elementwise(out, ref, atol, rtol, figures.finite, chunk_elems)
    if figures.finite:  # nan_to_num changes nothing: the norms of the difference pass are _norm_rel's
        norm_err = _ratio(figures.diff_norm, figures.ref_norm)
    else:
        norm_err = _norm_rel(out, ref, chunk_elems, nan_to_num=True)
    check = OutputCheck(True, "", max_abs_err=max_abs, mismatch_fraction=mismatch, norm_rel_err=norm_err)
    if mismatch > 0 or not all_finite:
        check.ok, check.reason = False, f"{mismatch:.2%} of elements differ beyond atol={atol}, rtol={rtol}"
        check.first_mismatch = _first_bad(out, ref, atol, rtol, chunk_elems)
    elif norm_err > norm_rtol:
        check.ok = False
        check.reason = f"normwise relative error {norm_err:.3g} > {norm_rtol} (values are small next to atol)"
    elif ref64 is not None and out.dtype == torch.float32:
        if figures.err_vs_fp64 is not None and figures.eager_err_vs_fp64 is not None:
            check.err_vs_fp64, check.eager_err_vs_fp64 = figures.err_vs_fp64, figures.eager_err_vs_fp64
        else:
            check.err_vs_fp64 = _norm_rel(out, ref64, chunk_elems)
            check.eager_err_vs_fp64 = _norm_rel(ref, ref64, chunk_elems)
        allowance = rounding_allowance(reduction_length)
        bound = max(precision_factor * check.eager_err_vs_fp64, precision_floor, allowance)
        check.precision_bound, check.reduction_length = bound, reduction_length
        if strict_precision and check.err_vs_fp64 > bound:
            check.ok, check.precision = False, True
            check.reason = (
                f"error against float64 {check.err_vs_fp64:.3g} exceeds {bound:.3g} (eager fp32: "
                f"{check.eager_err_vs_fp64:.3g}): the task is float32, compute in float32 (no fp16/bf16/TF32)"
            )
    return check
