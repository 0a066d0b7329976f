"""KernelBench level 1, problem 47 (47_Sum_reduction_over_a_dimension): torch.sum(x, dim, keepdim=True).

The task reduces dim 1 of a (128, 4096, 4095) float32 input (8.6 GB read, 2 MB written). The input is
viewed as (outer, R, inner) with R the reduced extent. When inner > 1 each block owns 64 adjacent
output columns of one outer index: a warp reads 32 consecutive floats of a row (coalesced), each
thread sums two columns over every 8th row with 4 independent accumulators per column (8 loads in
flight per thread), and the 8 row groups are combined in shared memory. Reducing the last dim
(inner == 1) uses one block per output with warp shuffles.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <vector>

constexpr int kColsPerWarp = 32;
constexpr int kColsPerThread = 2;
constexpr int kTileCols = kColsPerWarp * kColsPerThread;  // 64 output columns per block
constexpr int kRowGroups = 8;                              // blockDim.y
constexpr int kAcc = 4;                                    // accumulators (rows in flight) per column

// x viewed as (outer, R, inner); out as (outer, inner). grid = (ceil(inner / 64), outer), block = (32, 8).
__global__ void __launch_bounds__(kColsPerWarp * kRowGroups)
sum_mid_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t R, int64_t inner) {
    __shared__ float part[kRowGroups][kTileCols];
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int64_t o = blockIdx.y;
    const int64_t c0 = (int64_t)blockIdx.x * kTileCols + tx;
    const int64_t c1 = c0 + kColsPerWarp;
    const bool v0 = c0 < inner;
    const bool v1 = c1 < inner;
    const float* __restrict__ base = x + o * R * inner;

    float a0[kAcc], a1[kAcc];
#pragma unroll
    for (int k = 0; k < kAcc; ++k) {
        a0[k] = 0.0f;
        a1[k] = 0.0f;
    }
    // Row group ty takes rows ty, ty + 8, ty + 16, ...; kAcc of them per step.
    int64_t r = ty;
    const int64_t step = (int64_t)kRowGroups * kAcc;
    for (; r + (kAcc - 1) * kRowGroups < R; r += step) {
        float t0[kAcc], t1[kAcc];
#pragma unroll
        for (int k = 0; k < kAcc; ++k) {
            const float* p = base + (r + (int64_t)k * kRowGroups) * inner;
            t0[k] = v0 ? p[c0] : 0.0f;
            t1[k] = v1 ? p[c1] : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < kAcc; ++k) {
            a0[k] += t0[k];
            a1[k] += t1[k];
        }
    }
    for (; r < R; r += kRowGroups) {  // at most kAcc - 1 rows left for this group
        const float* p = base + r * inner;
        if (v0) a0[0] += p[c0];
        if (v1) a1[0] += p[c1];
    }
    part[ty][tx] = (a0[0] + a0[1]) + (a0[2] + a0[3]);
    part[ty][tx + kColsPerWarp] = (a1[0] + a1[1]) + (a1[2] + a1[3]);
    __syncthreads();
    // 8 row groups -> 1, pairwise: warps 0..1 each finish 32 of the 64 columns.
    if (ty < kColsPerThread) {
        const int c = tx + ty * kColsPerWarp;
        const float s = ((part[0][c] + part[1][c]) + (part[2][c] + part[3][c])) +
                        ((part[4][c] + part[5][c]) + (part[6][c] + part[7][c]));
        const int64_t col = (int64_t)blockIdx.x * kTileCols + c;
        if (col < inner) out[o * inner + col] = s;
    }
}

// Reducing the innermost dim: one block of 256 threads per output element.
constexpr int kRowThreads = 256;

__global__ void __launch_bounds__(kRowThreads) sum_last_kernel(const float* __restrict__ x, float* __restrict__ out,
                                                               int64_t R) {
    __shared__ float red[kRowThreads / 32];
    const float* __restrict__ p = x + (int64_t)blockIdx.x * R;
    float a[kAcc] = {0.0f, 0.0f, 0.0f, 0.0f};
    int64_t i = threadIdx.x;
    for (; i + (kAcc - 1) * kRowThreads < R; i += kAcc * kRowThreads) {
#pragma unroll
        for (int k = 0; k < kAcc; ++k) a[k] += p[i + k * kRowThreads];
    }
    for (; i < R; i += kRowThreads) a[0] += p[i];
    float s = (a[0] + a[1]) + (a[2] + a[3]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        s = threadIdx.x < kRowThreads / 32 ? red[threadIdx.x] : 0.0f;
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        if (threadIdx.x == 0) out[blockIdx.x] = s;
    }
}

torch::Tensor sum_dim_keepdim(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.device().is_cuda(), "sum_dim_keepdim: x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "sum_dim_keepdim: x must be float32");
    TORCH_CHECK(x.is_contiguous(), "sum_dim_keepdim: x must be contiguous");
    const int64_t nd = x.dim();
    TORCH_CHECK(nd >= 1, "sum_dim_keepdim: x must have at least one dimension");
    if (dim < 0) dim += nd;
    TORCH_CHECK(dim >= 0 && dim < nd, "sum_dim_keepdim: dim out of range");
    int64_t outer = 1, inner = 1;
    std::vector<int64_t> shape;
    for (int64_t d = 0; d < nd; ++d) {
        const int64_t sz = x.size(d);
        if (d < dim) outer *= sz;
        if (d > dim) inner *= sz;
        shape.push_back(d == dim ? 1 : sz);
    }
    const int64_t R = x.size(dim);
    auto out = torch::empty(shape, x.options());
    if (outer == 0 || inner == 0) return out;
    const float* xp = x.data_ptr<float>();
    float* op = out.data_ptr<float>();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    if (inner == 1) {
        TORCH_CHECK(outer <= 0x7fffffffLL, "sum_dim_keepdim: too many outputs");
        sum_last_kernel<<<(unsigned)outer, kRowThreads, 0, stream>>>(xp, op, R);
    } else {
        const int64_t tiles = (inner + kTileCols - 1) / kTileCols;
        TORCH_CHECK(tiles <= 0x7fffffffLL && outer <= 65535, "sum_dim_keepdim: shape too large for the grid");
        dim3 grid((unsigned)tiles, (unsigned)outer, 1);
        dim3 block(kColsPerWarp, kRowGroups, 1);
        sum_mid_kernel<<<grid, block, 0, stream>>>(xp, op, R, inner);
    }
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "sum_dim_keepdim: kernel launch failed: ", cudaGetErrorString(err));
    return out;
}
"""

cpp_source = "torch::Tensor sum_dim_keepdim(torch::Tensor x, int64_t dim);"

sum_ext = load_inline(
    name="kb_l1_47_sum_dim",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["sum_dim_keepdim"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_ext.sum_dim_keepdim(x.contiguous(), self.dim)
