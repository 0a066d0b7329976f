"""The longest reduction in a reference's forward: what an honest float32 implementation's rounding grows with.

Strict precision (compare.py) holds a float32 output's error against the float64 reference to a bound. An honest
float32 kernel that sums n terms in plain order (one thread along a 1M-long row of a matrix-vector product) rounds
about sqrt(n) times as much as one term does (the probabilistic bound of Higham and Mary, 2019), so a bound fixed
for all tasks refuses it on long reductions: KernelBench L1/4 (n = 1,048,576) measured 1.5e-4 against float64,
L1/6 (n = 524,288) 4.3e-5, where eager's blocked sums are 10x to 30x closer. `longest_reduction` finds n while the
grader runs its float64 reference (its own model on its own inputs, never the candidate's): the inner dimension of
every matrix product and convolution, the reduced elements of every sum, norm, mean, softmax and cumulative op. The
strict bound then allows `ROUNDING_FACTOR * u * sqrt(n)` (u = 2^-24, float32's unit roundoff) beside its other terms.

What this does not tell apart: where the longest reduction is long enough, reduced precision can land inside the
allowance. TF32 rounds each product's inputs to 11 bits (about 4e-4 normwise on signed inputs, whatever n): the
allowance reaches that at n of about 440,000, and on same-signed inputs, where TF32's errors average out over the
sum, earlier still. Such a kernel is as close to float64 as an honest plain-order float32 loop; the static policy
still refuses TF32 and half types where it sees them spelled (policy/cpp.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

FP32_UNIT_ROUNDOFF = 2.0**-24
ROUNDING_FACTOR = 10.0
"""The allowance's multiple of u * sqrt(n): plain-order float32 dot products of torch.rand inputs measured 0.16x-2.5x
of u * sqrt(n) for n from 16Ki to 1Mi (2.5x at 1Mi, where same-signed sums start to drift; 6x at 2Mi)."""

_INNER = {"mm", "addmm", "bmm", "baddbmm", "mv", "addmv", "_addmm_activation"}
"""Matrix products: the reduction is the first operand's last dimension (its position below)."""
_FIRST_OPERAND = {"mm": 0, "bmm": 0, "mv": 0, "addmm": 1, "baddbmm": 1, "addmv": 1, "_addmm_activation": 1}
_ALONG_DIM = {"cumsum", "cumprod", "logcumsumexp", "_softmax", "_log_softmax", "softmax", "log_softmax"}
"""Ops that reduce along one dimension (their second argument) and keep the input's shape."""
_SHRINKING = {
    "sum",
    "mean",
    "nansum",
    "prod",
    "norm",
    "linalg_vector_norm",
    "var",
    "std",
    "var_mean",
    "std_mean",
    "logsumexp",
    "native_layer_norm",
    "native_group_norm",
    "native_batch_norm",
    "_native_batch_norm_legit",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "_adaptive_avg_pool2d",
    "_adaptive_avg_pool3d",
    "adaptive_avg_pool1d",
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "binary_cross_entropy",
    "kl_div",
    "nll_loss",
    "nll_loss_forward",
    "trace",
}
"""Ops whose reduction is the input's elements per element of their smallest non-empty output."""


def rounding_allowance(reduction_length: int) -> float:
    """What an honest plain-order float32 reduction of this length may differ from float64, normwise."""
    return ROUNDING_FACTOR * FP32_UNIT_ROUNDOFF * math.sqrt(max(1, reduction_length))


def op_reduction_length(name: str, args: tuple[Any, ...], outputs: list[Any]) -> int:
    """The terms one output element of aten op `name` sums (1 for an op that sums none or is unknown)."""
    import torch

    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if not tensors:
        return 1
    if name in _INNER:
        operand = args[_FIRST_OPERAND[name]]
        return int(operand.shape[-1]) if operand.dim() else 1
    if name in ("dot", "vdot"):
        return int(args[0].numel())
    if name == "addbmm":
        return int(args[1].shape[0] * args[1].shape[-1])
    if "convolution" in name and len(args) > 1 and isinstance(args[1], torch.Tensor):
        return _convolution_length(args)
    if "scaled_dot_product" in name and len(tensors) >= 2:
        return int(max(tensors[0].shape[-1], tensors[1].shape[-2]))
    if name in _ALONG_DIM and len(args) > 1 and isinstance(args[1], int) and args[0].dim():
        return int(args[0].shape[args[1]])
    if name in _SHRINKING:
        sizes = [o.numel() for o in outputs if isinstance(o, torch.Tensor) and o.numel() > 0]
        return max(1, tensors[0].numel() // min(sizes)) if sizes else 1
    return 1


def _convolution_length(args: tuple[Any, ...]) -> int:
    """Input channels per group times the kernel's size: aten.convolution's (input, weight, bias, stride, padding,
    dilation, transposed, output_padding, groups); a transposed weight is (in, out / groups, *kernel)."""
    weight = args[1]
    transposed = len(args) > 6 and bool(args[6])
    groups = int(args[8]) if len(args) > 8 and isinstance(args[8], int) else 1
    kernel = math.prod(int(s) for s in weight.shape[2:])
    channels = int(weight.shape[0]) // max(1, groups) if transposed else int(weight.shape[1])
    return max(1, channels * kernel)


def longest_reduction(forward: Callable[[], Any]) -> tuple[Any, int]:
    """forward's result and the longest reduction among the aten ops it ran (1 where none sums)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    longest = [1]

    class Longest(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
            out = func(*args, **(kwargs or {}))
            flat = list(out) if isinstance(out, tuple | list) else [out]
            longest[0] = max(longest[0], op_reduction_length(func.overloadpacket.__name__, tuple(args), flat))
            return out

    with Longest():
        result = forward()
    return result, longest[0]
