"""The strict precision bound's float32 rounding allowance: the reference's longest reduction, and what it lets pass."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cuda_agent.judge.child.compare import check_output
from cuda_agent.judge.child.reduction import longest_reduction, rounding_allowance

STRICT = {
    "atol": 1e-2,
    "rtol": 1e-2,
    "norm_rtol": 1e-2,
    "strict_precision": True,
    "precision_factor": 10.0,
    "precision_floor": 1e-5,
}


@pytest.mark.parametrize(
    ("model", "inputs", "length"),
    [
        (torch.nn.Linear(96, 8, dtype=torch.float64), [torch.randn(4, 96, dtype=torch.float64)], 96),
        (lambda a, b: a @ b, [torch.randn(3, 5, 70), torch.randn(3, 70, 2)], 70),
        (lambda a, b: torch.matmul(a, b), [torch.randn(6, 300), torch.randn(300)], 300),
        (torch.nn.Conv2d(6, 4, 3, groups=2), [torch.randn(1, 6, 8, 8)], 3 * 9),
        (torch.nn.ConvTranspose2d(6, 4, 3), [torch.randn(1, 6, 5, 5)], 6 * 9),
        (lambda x: x.sum(dim=(1, 2)), [torch.randn(2, 10, 40)], 400),
        (lambda x: torch.softmax(x, dim=1), [torch.randn(2, 500)], 500),
        (lambda x: torch.cumsum(x, 0), [torch.randn(77, 3)], 77),
        (torch.nn.LayerNorm(64, dtype=torch.float64), [torch.randn(5, 64, dtype=torch.float64)], 64),
        (torch.relu, [torch.randn(1000)], 1),
        (lambda x: x.amax(dim=1), [torch.randn(3, 1000)], 1),  # a maximum rounds nothing
    ],
    ids=[
        "linear",
        "bmm",
        "mv",
        "grouped_conv",
        "transposed_conv",
        "sum",
        "softmax",
        "cumsum",
        "layer_norm",
        "relu",
        "amax",
    ],
)
def test_longest_reduction_of_common_ops(model, inputs: list[torch.Tensor], length: int) -> None:
    with torch.no_grad():
        result, found = longest_reduction(lambda: model(*inputs))
        assert torch.equal(result, model(*inputs))
    assert found == length


def _plain_order_matvec(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b summed term by term in float32, left to right: one thread per row, as an honest simple kernel does."""
    products = (a * b.view(1, -1)).numpy()
    return torch.from_numpy(np.add.accumulate(products, axis=1, dtype=np.float32)[:, -1].copy())


def test_plain_order_float32_matvec_of_a_long_row_passes() -> None:
    """KernelBench L1/4's K (1Mi) and input distribution: plain order rounds far more than eager's blocked sums
    (on the GPU eager's error against float64 is a few 1e-6; float64 rounded to float32 stands in for it here)."""
    generator = torch.Generator().manual_seed(0)
    a, b = torch.rand(4, 1 << 20, generator=generator), torch.rand(1 << 20, generator=generator)
    ref64 = a.double() @ b.double()
    eager = ref64.float()
    plain = _plain_order_matvec(a, b)
    short = check_output(plain, eager, ref64, **STRICT)  # the bound as it was, with no reduction length
    assert not short.ok and short.precision
    check = check_output(plain, eager, ref64, **STRICT, reduction_length=1 << 20)
    assert check.ok, check.reason
    assert check.err_vs_fp64 > 1e-4 and check.precision_bound == rounding_allowance(1 << 20)


def _tf32_rounded(x: torch.Tensor) -> torch.Tensor:
    """x rounded to nearest at TF32's 10-bit mantissa, as tensor cores round matmul inputs."""
    bits = x.view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


@pytest.mark.parametrize("k", [64, 4096, 65536])
def test_tf32_matmul_still_fails_with_its_reduction_length(k: int) -> None:
    generator = torch.Generator().manual_seed(1)
    a, b = torch.randn(16, k, generator=generator), torch.randn(k, 16, generator=generator)
    with torch.no_grad():
        ref64, length = longest_reduction(lambda: a.double() @ b.double())
    assert length == k
    low = _tf32_rounded(a) @ _tf32_rounded(b)
    check = check_output(low, a @ b, ref64, **STRICT, reduction_length=length)
    assert not check.ok, check  # beyond the strict bound, or (long signed sums cancel) beyond rtol already
    assert check.precision or check.mismatch_fraction > 0
    half = (a.half().float() @ b.half().float()).contiguous()
    assert not check_output(half, a @ b, ref64, **STRICT, reduction_length=length).ok
