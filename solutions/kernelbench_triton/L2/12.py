import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gemm_multiply_leaky_relu_kernel(
    x_ptr,
    w_ptr,
    bias_ptr,
    out_ptr,
    m,
    n,
    multiplier,
    negative_slope,
    K: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    # out = leaky_relu((x @ w.T + bias) * multiplier); w is (n, K) as nn.Linear stores it. fp32 products
    # ("ieee": no TF32). K is a constexpr: Triton's CPU interpreter cannot loop to a runtime scalar.
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, K, BLOCK_K):
        ks = start + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + rows[:, None] * K + ks[None, :], mask=(rows[:, None] < m) & (ks[None, :] < K), other=0.0)
        w = tl.load(w_ptr + cols[None, :] * K + ks[:, None], mask=(cols[None, :] < n) & (ks[:, None] < K), other=0.0)
        acc += tl.dot(x, w, input_precision="ieee")
    y = (acc + tl.load(bias_ptr + cols, mask=cols < n, other=0.0)[None, :]) * multiplier
    y = tl.where(y > 0.0, y, y * negative_slope)
    tl.store(out_ptr + rows[:, None] * n + cols[None, :], y, mask=(rows[:, None] < m) & (cols[None, :] < n))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        # Held only so that the parameters are created and initialised exactly as in the reference; never called.
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = float(multiplier)
        self.negative_slope = float(negative_slope)

    def forward(self, x):
        x = x.contiguous()
        m, k = x.shape
        n = self.gemm.weight.shape[0]
        out = torch.empty(m, n, dtype=x.dtype, device=x.device)
        grid = (triton.cdiv(m, 64), triton.cdiv(n, 64))
        gemm_multiply_leaky_relu_kernel[grid](
            x,
            self.gemm.weight,
            self.gemm.bias,
            out,
            m,
            n,
            self.multiplier,
            self.negative_slope,
            K=k,
            BLOCK_M=64,
            BLOCK_N=64,
            BLOCK_K=32,
        )
        return out
