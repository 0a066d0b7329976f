"""Correctness and precision figures for one output against its references, in bounded memory.

Three tests, all of which an output must pass:
1. elementwise `allclose(out, ref, atol, rtol)` as in the paper and KernelBench;
2. normwise `||out - ref|| <= norm_rtol * ||ref|| + tiny`, which fails outputs that pass (1) only
   because atol dwarfs the values (zeros for a 393,216-wide softmax pass (1), not this);
3. strict precision mode: for a float32 output, the candidate's normwise error against the
   float64 reference may be at most `precision_factor` times eager float32's, or
   `precision_floor`, whichever is larger. fp16/bf16/TF32 arithmetic lands well above that.

Every figure is accumulated over chunks of `chunk_elems` elements (float64 upcasts per chunk),
so the judge's own temporaries stay a few chunks in size however large the output: whole-tensor
float64 copies of a 6.4 GB output once took 12 GB each and ran the H200 out of memory when two
judges shared it. The chunked figures equal the whole-tensor ones (sums of squares combined per
chunk, counts exact); see tests/judge/test_compare.py.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

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
    import torch

    return float(torch.linalg.vector_norm(torch.stack(norms))) if norms else 0.0


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
    diff, ref = _norm(diffs), _norm(refs)
    if ref == 0:
        return 0.0 if diff == 0 else math.inf
    return diff / ref


def same_values(a: Any, b: Any, chunk_elems: int = CHUNK_ELEMS) -> bool:
    """Whether two tensors hold the same values (NaN where the other has NaN), in bounded memory."""
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
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
    chunk_elems: int = CHUNK_ELEMS,
) -> OutputCheck:
    """Compare one candidate output with the eager reference (and the float64 one when given).

    Args:
        out, ref: the candidate's and the reference's output (same shape, dtype, device expected).
        ref64: the reference computed in float64, or None (no precision check).
        atol, rtol: elementwise tolerances; norm_rtol: the normwise bound.
        strict_precision, precision_factor, precision_floor: the strict precision mode (module docstring).
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
    close_count = torch.zeros((), dtype=torch.int64, device=out.device)
    finite_differs = torch.zeros((), dtype=torch.int64, device=out.device)
    max_abs_t = torch.full((), -math.inf, dtype=torch.float64, device=out.device)
    for _, (o, r) in _chunks(out, ref, chunk_elems=chunk_elems):
        close_count += torch.isclose(o, r, atol=atol, rtol=rtol, equal_nan=True).sum()
        finite_differs += (torch.isfinite(o) != torch.isfinite(r)).sum()
        max_abs_t = torch.maximum(max_abs_t, (o.double() - r.double()).abs().nan_to_num(nan=math.inf).max())
    mismatch = 1.0 - int(close_count) / out.numel()
    all_finite = int(finite_differs) == 0
    max_abs = float(max_abs_t)
    norm_err = _norm_rel(out, ref, chunk_elems, nan_to_num=True)
    check = OutputCheck(True, "", max_abs_err=max_abs, mismatch_fraction=mismatch, norm_rel_err=norm_err)
    if mismatch > 0 or not all_finite:
        check.ok, check.reason = False, f"{mismatch:.2%} of elements differ beyond atol={atol}, rtol={rtol}"
        check.first_mismatch = _first_bad(out, ref, atol, rtol, chunk_elems)
    elif norm_err > norm_rtol:
        check.ok = False
        check.reason = f"normwise relative error {norm_err:.3g} > {norm_rtol} (values are small next to atol)"
    elif ref64 is not None and out.dtype == torch.float32:
        check.err_vs_fp64 = _norm_rel(out, ref64, chunk_elems)
        check.eager_err_vs_fp64 = _norm_rel(ref, ref64, chunk_elems)
        bound = max(precision_factor * check.eager_err_vs_fp64, precision_floor)
        if strict_precision and check.err_vs_fp64 > bound:
            check.ok, check.precision = False, True
            check.reason = (
                f"error against float64 {check.err_vs_fp64:.3g} exceeds {bound:.3g} (eager fp32: "
                f"{check.eager_err_vs_fp64:.3g}): the task is float32, compute in float32 (no fp16/bf16/TF32)"
            )
    return check
