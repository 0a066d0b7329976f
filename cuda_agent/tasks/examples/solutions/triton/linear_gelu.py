import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_gelu_kernel(
    x_ptr,
    w_ptr,
    bias_ptr,
    out_ptr,
    m,
    n,
    k: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    # out = gelu(x @ w.T + bias), exact (erf) GELU; w is (n, k) as nn.Linear stores it.
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, k, BLOCK_K):
        ks = start + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + rows[:, None] * k + ks[None, :], mask=(rows[:, None] < m) & (ks[None, :] < k), other=0.0)
        w = tl.load(w_ptr + cols[None, :] * k + ks[:, None], mask=(cols[None, :] < n) & (ks[:, None] < k), other=0.0)
        acc += tl.dot(x, w, input_precision="ieee")
    y = acc + tl.load(bias_ptr + cols, mask=cols < n, other=0.0)[None, :]
    y = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))
    tl.store(out_ptr + rows[:, None] * n + cols[None, :], y, mask=(rows[:, None] < m) & (cols[None, :] < n))


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        # Held only so that the parameters are created, named and initialised exactly as in the
        # reference (same seed, same order); forward never calls it.
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        m, k = x.shape
        n = self.linear.weight.shape[0]
        out = torch.empty(m, n, dtype=x.dtype, device=x.device)
        grid = (triton.cdiv(m, 32), triton.cdiv(n, 32))
        linear_gelu_kernel[grid](
            x, self.linear.weight, self.linear.bias, out, m, n, k, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32
        )
        return out
