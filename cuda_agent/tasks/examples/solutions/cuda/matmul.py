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

// C = A @ B in fp32 (FMA, no TF32). Each block computes a 32x32 tile of C; each thread computes
// four outputs in one column, so every B value read from shared memory feeds four FMAs. A warp
// spans one tile row, so its As reads are broadcasts and its Bs reads hit 32 distinct banks.
__global__ void matmul_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                              int64_t M, int64_t N, int64_t K) {
    __shared__ float As[kTile][kTile];
    __shared__ float Bs[kTile][kTile];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t row0 = (int64_t)blockIdx.y * kTile;
    const int64_t col = (int64_t)blockIdx.x * kTile + tx;
    float acc[kRowsPerThread] = {0.f, 0.f, 0.f, 0.f};
    for (int64_t k0 = 0; k0 < K; k0 += kTile) {
#pragma unroll
        for (int r = 0; r < kRowsPerThread; ++r) {
            const int lr = ty + r * kBlockRows;
            const int64_t ar = row0 + lr, ac = k0 + tx, br = k0 + lr;
            // Out-of-range cells become 0 so that ragged edges need no special case in the FMA loop.
            As[lr][tx] = (ar < M && ac < K) ? A[ar * K + ac] : 0.f;
            Bs[lr][tx] = (br < K && col < N) ? B[br * N + col] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kTile; ++k) {
            const float b = Bs[k][tx];
#pragma unroll
            for (int r = 0; r < kRowsPerThread; ++r) acc[r] = fmaf(As[ty + r * kBlockRows][k], b, acc[r]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
        const int64_t row = row0 + ty + r * kBlockRows;
        if (row < M && col < N) C[row * N + col] = acc[r];
    }
}

torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.device().is_cuda() && b.device().is_cuda(), "matmul_forward: inputs must be CUDA tensors");
    TORCH_CHECK(a.device() == b.device(), "matmul_forward: inputs must be on one device");
    TORCH_CHECK(a.dtype() == torch::kFloat32 && b.dtype() == torch::kFloat32, "matmul_forward: inputs must be float32");
    TORCH_CHECK(a.is_contiguous() && b.is_contiguous(), "matmul_forward: inputs must be contiguous");
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2, "matmul_forward: inputs must be 2-D");
    const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
    TORCH_CHECK(b.size(0) == K, "matmul_forward: inner dimensions differ");
    auto c = torch::empty({M, N}, a.options());
    if (M == 0 || N == 0) return c;
    // K == 0 still launches: the tile loop is skipped and every output is written as 0.
    const int64_t grid_y = (M + kTile - 1) / kTile;
    TORCH_CHECK(grid_y <= 65535, "matmul_forward: too many rows for one grid");
    const dim3 grid((unsigned)((N + kTile - 1) / kTile), (unsigned)grid_y);
    const dim3 block(kTile, kBlockRows);
    matmul_kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
        a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), M, N, K);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "matmul kernel launch failed: ", cudaGetErrorString(err));
    return c;
}
"""

cpp_source = "torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b);"

matmul_ext = load_inline(
    name="examples_matmul_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["matmul_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return matmul_ext.matmul_forward(a.contiguous(), b.contiguous())
