import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <cstdint>

// Same layout as the ReLU example: float4 grid-stride body when all pointers are 16-byte aligned,
// scalar tail (or scalar everything when they are not).
__global__ void scale_add_kernel(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                                 float alpha, int64_t n, bool vec) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t done = 0;
    if (vec) {
        const int64_t n4 = n / 4;
        const float4* x4 = reinterpret_cast<const float4*>(x);
        const float4* y4 = reinterpret_cast<const float4*>(y);
        float4* o4 = reinterpret_cast<float4*>(out);
        for (int64_t i = tid; i < n4; i += stride) {
            const float4 a = x4[i];
            const float4 b = y4[i];
            o4[i] = make_float4(a.x * alpha + b.x, a.y * alpha + b.y, a.z * alpha + b.z, a.w * alpha + b.w);
        }
        done = n4 * 4;
    }
    for (int64_t i = done + tid; i < n; i += stride) out[i] = x[i] * alpha + y[i];
}

torch::Tensor scale_add_forward(torch::Tensor x, torch::Tensor y, double alpha) {
    TORCH_CHECK(x.device().is_cuda() && y.device().is_cuda(), "scale_add_forward: inputs must be CUDA tensors");
    TORCH_CHECK(x.device() == y.device(), "scale_add_forward: inputs must be on one device");
    TORCH_CHECK(x.dtype() == torch::kFloat32 && y.dtype() == torch::kFloat32, "scale_add_forward: inputs must be float32");
    TORCH_CHECK(x.is_contiguous() && y.is_contiguous(), "scale_add_forward: inputs must be contiguous");
    TORCH_CHECK(x.dim() == y.dim(), "scale_add_forward: x and y must have the same shape");
    for (int64_t d = 0; d < x.dim(); ++d) {
        TORCH_CHECK(x.size(d) == y.size(d), "scale_add_forward: x and y must have the same shape");
    }
    auto out = torch::empty_like(x);
    const int64_t n = x.numel();
    if (n == 0) return out;
    const float* xp = x.data_ptr<float>();
    const float* yp = y.data_ptr<float>();
    float* op = out.data_ptr<float>();
    const bool vec = (reinterpret_cast<uintptr_t>(xp) % 16 == 0) && (reinterpret_cast<uintptr_t>(yp) % 16 == 0) &&
                     (reinterpret_cast<uintptr_t>(op) % 16 == 0);
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, x.device().index());
    const int threads = 256;
    const int64_t work = vec ? (n + 3) / 4 : n;
    const int64_t wanted = (work + threads - 1) / threads;
    const int blocks = (int)(wanted < (int64_t)sms * 8 ? wanted : (int64_t)sms * 8);
    // torch multiplies a float32 tensor by a Python scalar in float32, so round alpha the same way.
    scale_add_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(xp, yp, op, (float)alpha, n, vec);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "scale_add kernel launch failed: ", cudaGetErrorString(err));
    return out;
}
"""

cpp_source = "torch::Tensor scale_add_forward(torch::Tensor x, torch::Tensor y, double alpha);"

scale_add_ext = load_inline(
    name="examples_scale_add_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["scale_add_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = float(alpha)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return scale_add_ext.scale_add_forward(x.contiguous(), y.contiguous(), self.alpha)
