import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// Running (max, sum of exp(v - max)) pairs: merging two rescales the smaller-max sum, so a row
// needs one read for the statistics and one for the output instead of three passes.
struct MaxSum {
    float m;
    float s;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
    const float m = fmaxf(a.m, b.m);
    // Both -inf means nothing finite seen yet; exp(-inf - -inf) would be NaN.
    if (m == -INFINITY) return {m, 0.f};
    return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

__device__ __forceinline__ MaxSum warp_merge(MaxSum v) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        MaxSum other{__shfl_xor_sync(0xffffffffu, v.m, offset), __shfl_xor_sync(0xffffffffu, v.s, offset)};
        v = merge(v, other);
    }
    return v;
}

// One block per row.
__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
    __shared__ float sh_m[kWarps];
    __shared__ float sh_s[kWarps];
    const float* in = x + (int64_t)blockIdx.x * cols;
    float* out = y + (int64_t)blockIdx.x * cols;

    MaxSum acc{-INFINITY, 0.f};
    for (int64_t c = threadIdx.x; c < cols; c += kThreads) {
        // One exp per element: rescale the sum only when the maximum moves. A -inf element adds
        // exp(-inf) = 0, and skipping it avoids -inf - -inf while the maximum is still -inf.
        const float v = in[c];
        if (v > acc.m) {
            acc.s = acc.s * expf(acc.m - v) + 1.f;
            acc.m = v;
        } else if (v > -INFINITY) {
            acc.s += expf(v - acc.m);
        }
    }
    acc = warp_merge(acc);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        sh_m[warp] = acc.m;
        sh_s[warp] = acc.s;
    }
    __syncthreads();
    if (warp == 0) {
        MaxSum v = lane < kWarps ? MaxSum{sh_m[lane], sh_s[lane]} : MaxSum{-INFINITY, 0.f};
        v = warp_merge(v);
        if (lane == 0) {
            sh_m[0] = v.m;
            sh_s[0] = v.s;
        }
    }
    __syncthreads();
    const float m = sh_m[0];
    const float inv = 1.f / sh_s[0];
    for (int64_t c = threadIdx.x; c < cols; c += kThreads) out[c] = expf(in[c] - m) * inv;
}

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cuda(), "softmax_forward: x must be a CUDA tensor");
    TORCH_CHECK(x.dtype() == torch::kFloat32, "softmax_forward: x must be float32");
    TORCH_CHECK(x.is_contiguous(), "softmax_forward: x must be contiguous");
    TORCH_CHECK(x.dim() >= 1, "softmax_forward: x must have at least one dimension");
    auto y = torch::empty_like(x);
    const int64_t cols = x.size(x.dim() - 1);
    if (cols == 0) return y;
    const int64_t rows = x.numel() / cols;
    if (rows == 0) return y;
    TORCH_CHECK(rows <= 2147483647LL, "softmax_forward: too many rows for one grid");
    softmax_kernel<<<(unsigned)rows, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), cols);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "softmax kernel launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

cpp_source = "torch::Tensor softmax_forward(torch::Tensor x);"

softmax_ext = load_inline(
    name="examples_softmax_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["softmax_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_ext.softmax_forward(x.contiguous())
