"""Correctness and precision figures for one output against its references.

Three tests, all of which an output must pass:
1. elementwise `allclose(out, ref, atol, rtol)` as in the paper and KernelBench;
2. normwise `||out - ref|| <= norm_rtol * ||ref|| + tiny`, which fails outputs that pass (1) only
   because atol dwarfs the values (zeros for a 393,216-wide softmax pass (1), not this);
3. strict precision mode: for a float32 output, the candidate's normwise error against the
   float64 reference may be at most `precision_factor` times eager float32's, or
   `precision_floor`, whichever is larger. fp16/bf16/TF32 arithmetic lands well above that.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any


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


def _norm_rel(a: Any, b: Any) -> float:
    import torch

    diff = torch.linalg.vector_norm((a.double() - b.double()).flatten())
    ref = torch.linalg.vector_norm(b.double().flatten())
    if ref == 0:
        return 0.0 if diff == 0 else math.inf
    return float(diff / ref)


def _first_mismatch(out: Any, ref: Any, good: Any) -> str:
    bad = (~good).nonzero()
    if bad.numel() == 0:
        return ""
    index = [int(i) for i in bad[0]]
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
) -> OutputCheck:
    """Compare one candidate output with the eager reference (and the float64 one when given)."""
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
        same = torch.equal(out, ref)
        return OutputCheck(same, "" if same else "integer/bool output differs from the reference")
    if out.numel() == 0:
        return OutputCheck(True, "")
    close = torch.isclose(out, ref, atol=atol, rtol=rtol, equal_nan=True)
    mismatch = 1.0 - float(close.float().mean())
    finite = torch.isfinite(out) == torch.isfinite(ref)
    max_abs = float((out.double() - ref.double()).abs().nan_to_num(nan=math.inf).max())
    norm_err = _norm_rel(out.nan_to_num(), ref.nan_to_num())
    check = OutputCheck(True, "", max_abs_err=max_abs, mismatch_fraction=mismatch, norm_rel_err=norm_err)
    if mismatch > 0 or not bool(finite.all()):
        check.ok, check.reason = False, f"{mismatch:.2%} of elements differ beyond atol={atol}, rtol={rtol}"
        check.first_mismatch = _first_mismatch(out, ref, close & finite)
    elif norm_err > norm_rtol:
        check.ok = False
        check.reason = f"normwise relative error {norm_err:.3g} > {norm_rtol} (values are small next to atol)"
    elif ref64 is not None and out.dtype == torch.float32:
        check.err_vs_fp64 = _norm_rel(out, ref64)
        check.eager_err_vs_fp64 = _norm_rel(ref, ref64)
        bound = max(precision_factor * check.eager_err_vs_fp64, precision_floor)
        if strict_precision and check.err_vs_fp64 > bound:
            check.ok, check.precision = False, True
            check.reason = (
                f"error against float64 {check.err_vs_fp64:.3g} exceeds {bound:.3g} (eager fp32: "
                f"{check.eager_err_vs_fp64:.3g}): the task is float32, compute in float32 (no fp16/bf16/TF32)"
            )
    return check
