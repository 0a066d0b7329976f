import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <vector>

constexpr int kThreads = 256;

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// One block per row: each thread adds a strided slice (consecutive threads read consecutive
// addresses, so loads coalesce), then warps reduce with shuffles and warp 0 combines the warps.
__global__ void row_sum_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t cols) {
    __shared__ float partial[kThreads / 32];
    const float* row = x + (int64_t)blockIdx.x * cols;
    float acc = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += kThreads) acc += row[c];
    acc = warp_sum(acc);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) partial[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        acc = lane < kThreads / 32 ? partial[lane] : 0.f;
        acc = warp_sum(acc);
        if (lane == 0) out[blockIdx.x] = acc;
    }
}

torch::Tensor row_sum_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cuda(), "row_sum_forward: x must be a CUDA tensor");
    TORCH_CHECK(x.dtype() == torch::kFloat32, "row_sum_forward: x must be float32");
    TORCH_CHECK(x.is_contiguous(), "row_sum_forward: x must be contiguous");
    TORCH_CHECK(x.dim() >= 1, "row_sum_forward: x must have at least one dimension");
    std::vector<int64_t> out_shape;
    int64_t rows = 1;
    for (int64_t d = 0; d + 1 < x.dim(); ++d) {
        out_shape.push_back(x.size(d));
        rows *= x.size(d);
    }
    const int64_t cols = x.size(x.dim() - 1);
    auto out = torch::empty(out_shape, x.options());
    if (rows == 0) return out;
    TORCH_CHECK(rows <= 2147483647LL, "row_sum_forward: too many rows for one grid");
    // With cols == 0 every block still runs and writes 0, so no element of `out` is left unset.
    row_sum_kernel<<<(unsigned)rows, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), out.data_ptr<float>(), cols);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "row_sum kernel launch failed: ", cudaGetErrorString(err));
    return out;
}
"""

cpp_source = "torch::Tensor row_sum_forward(torch::Tensor x);"

row_sum_ext = load_inline(
    name="examples_row_sum_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["row_sum_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return row_sum_ext.row_sum_forward(x.contiguous())
