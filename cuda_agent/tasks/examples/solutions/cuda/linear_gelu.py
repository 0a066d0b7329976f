import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>

constexpr int kTile = 32;
constexpr int kRowsPerThread = 4;
constexpr int kBlockRows = kTile / kRowsPerThread;  // blockDim = (kTile, kBlockRows)

// out = gelu(x @ W^T + b), the matmul tiled as in the matmul example. W is [out, in], so its tile
// is read along k (coalesced) and stored transposed; the extra column of Ws keeps that transposed
// store free of bank conflicts. Bias and GELU are applied in registers before the only write.
__global__ void linear_gelu_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                   const float* __restrict__ bias, float* __restrict__ out,
                                   int64_t M, int64_t N, int64_t K) {
    __shared__ float Xs[kTile][kTile];
    __shared__ float Ws[kTile][kTile + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t row0 = (int64_t)blockIdx.y * kTile;
    const int64_t col0 = (int64_t)blockIdx.x * kTile;
    const int64_t col = col0 + tx;
    float acc[kRowsPerThread] = {0.f, 0.f, 0.f, 0.f};
    for (int64_t k0 = 0; k0 < K; k0 += kTile) {
#pragma unroll
        for (int r = 0; r < kRowsPerThread; ++r) {
            const int lr = ty + r * kBlockRows;
            const int64_t xr = row0 + lr, kc = k0 + tx, wr = col0 + lr;
            Xs[lr][tx] = (xr < M && kc < K) ? x[xr * K + kc] : 0.f;
            Ws[tx][lr] = (wr < N && kc < K) ? w[wr * K + kc] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kTile; ++k) {
            const float wv = Ws[k][tx];
#pragma unroll
            for (int r = 0; r < kRowsPerThread; ++r) acc[r] = fmaf(Xs[ty + r * kBlockRows][k], wv, acc[r]);
        }
        __syncthreads();
    }
    if (col >= N) return;
    const float b = bias[col];
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
        const int64_t row = row0 + ty + r * kBlockRows;
        if (row < M) {
            const float v = acc[r] + b;
            // Exact GELU, matching F.gelu's default approximate='none'.
            out[row * N + col] = 0.5f * v * (1.f + erff(v * 0.70710678118654752440f));
        }
    }
}

torch::Tensor linear_gelu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.device().is_cuda() && weight.device().is_cuda() && bias.device().is_cuda(),
                "linear_gelu_forward: inputs must be CUDA tensors");
    TORCH_CHECK(x.device() == weight.device() && x.device() == bias.device(),
                "linear_gelu_forward: inputs must be on one device");
    TORCH_CHECK(x.dtype() == torch::kFloat32 && weight.dtype() == torch::kFloat32 && bias.dtype() == torch::kFloat32,
                "linear_gelu_forward: inputs must be float32");
    TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(),
                "linear_gelu_forward: inputs must be contiguous");
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && bias.dim() == 1, "linear_gelu_forward: bad ranks");
    const int64_t M = x.size(0), K = x.size(1), N = weight.size(0);
    TORCH_CHECK(weight.size(1) == K && bias.size(0) == N, "linear_gelu_forward: shapes do not match");
    auto out = torch::empty({M, N}, x.options());
    if (M == 0 || N == 0) return out;
    const int64_t grid_y = (M + kTile - 1) / kTile;
    TORCH_CHECK(grid_y <= 65535, "linear_gelu_forward: too many rows for one grid");
    const dim3 grid((unsigned)((N + kTile - 1) / kTile), (unsigned)grid_y);
    const dim3 block(kTile, kBlockRows);
    linear_gelu_kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), M, N, K);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "linear_gelu kernel launch failed: ", cudaGetErrorString(err));
    return out;
}
"""

cpp_source = "torch::Tensor linear_gelu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);"

linear_gelu_ext = load_inline(
    name="examples_linear_gelu_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["linear_gelu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        # Held only so that the parameters are created, named and initialised exactly as in the
        # reference (same seed, same order); forward never calls it.
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear_gelu_ext.linear_gelu_forward(x.contiguous(), self.linear.weight, self.linear.bias)
