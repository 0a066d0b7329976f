import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <cstdint>

__device__ __forceinline__ float relu1(float v) {
    // `v < 0 ? 0 : v` lets NaN through, as torch.relu does.
    return v < 0.0f ? 0.0f : v;
}

// Grid-stride loop over float4s, then the last n % 4 elements one by one. `vec` is false when
// either pointer is not 16-byte aligned (e.g. a sliced input), and then every element is scalar.
__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, bool vec) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t done = 0;
    if (vec) {
        const int64_t n4 = n / 4;
        const float4* x4 = reinterpret_cast<const float4*>(x);
        float4* y4 = reinterpret_cast<float4*>(y);
        for (int64_t i = tid; i < n4; i += stride) {
            float4 v = x4[i];
            v.x = relu1(v.x);
            v.y = relu1(v.y);
            v.z = relu1(v.z);
            v.w = relu1(v.w);
            y4[i] = v;
        }
        done = n4 * 4;
    }
    for (int64_t i = done + tid; i < n; i += stride) y[i] = relu1(x[i]);
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cuda(), "relu_forward: x must be a CUDA tensor");
    TORCH_CHECK(x.dtype() == torch::kFloat32, "relu_forward: x must be float32");
    TORCH_CHECK(x.is_contiguous(), "relu_forward: x must be contiguous");
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    if (n == 0) return y;
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const bool vec = (reinterpret_cast<uintptr_t>(xp) % 16 == 0) && (reinterpret_cast<uintptr_t>(yp) % 16 == 0);
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, x.device().index());
    const int threads = 256;
    const int64_t work = vec ? (n + 3) / 4 : n;
    // Enough blocks to fill every SM several times over; the grid-stride loop covers the rest.
    const int64_t wanted = (work + threads - 1) / threads;
    const int blocks = (int)(wanted < (int64_t)sms * 8 ? wanted : (int64_t)sms * 8);
    relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(xp, yp, n, vec);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "relu kernel launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

cpp_source = "torch::Tensor relu_forward(torch::Tensor x);"

relu_ext = load_inline(
    name="examples_relu_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["relu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_forward(x.contiguous())
