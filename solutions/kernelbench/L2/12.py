"""KernelBench level 2, problem 12 (12_Gemm_Multiply_LeakyReLU): leaky_relu((x W^T + b) * multiplier).

x is (1024, 8192), W is (8192, 8192). The GEMM (137 GFLOP, nearly all of the time) runs in cuBLAS
SGEMM with FP32 math (CUBLAS_DEFAULT_MATH, no TF32) straight into the output; one fused float4
epilogue kernel then adds the bias, multiplies and applies LeakyReLU in place, in the reference's
order of operations. The nn.Linear is kept only to own the parameters (same creation order and
initialisation as the reference); it is never called.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include "cublas_v2.h"
#include <cstdint>
#include <vector>

static cublasHandle_t gemm_handle(int device) {
    static cublasHandle_t handles[64] = {};
    TORCH_CHECK(device >= 0 && device < 64, "gemm: unsupported device index ", device);
    if (handles[device] == nullptr) {
        cublasHandle_t h = nullptr;
        cublasStatus_t st = cublasCreate(&h);
        TORCH_CHECK(st == CUBLAS_STATUS_SUCCESS, "gemm: cublasCreate failed: ", cublasGetStatusString(st));
        st = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);  // FP32 math, no TF32
        TORCH_CHECK(st == CUBLAS_STATUS_SUCCESS, "gemm: cublasSetMathMode failed: ", cublasGetStatusString(st));
        handles[device] = h;
    }
    return handles[device];
}

__device__ __forceinline__ float epi(float acc, float bias, float mult, float slope) {
    const float t = (acc + bias) * mult;
    return t > 0.0f ? t : t * slope;
}

constexpr int kThreads = 256;

// y is (M, N) row-major and holds x W^T; y = leaky_relu((y + b) * mult) in place.
__global__ void __launch_bounds__(kThreads) bias_mul_lrelu_kernel(float* __restrict__ y, const float* __restrict__ b,
                                                                  int64_t M, int64_t N, float mult, float slope,
                                                                  bool vec) {
    const int64_t stride = (int64_t)gridDim.x * kThreads;
    const int64_t tid = (int64_t)blockIdx.x * kThreads + threadIdx.x;
    if (vec) {  // N % 4 == 0 and both pointers 16-byte aligned
        const int64_t n4 = N >> 2;
        const int64_t total = M * n4;
        float4* y4 = reinterpret_cast<float4*>(y);
        const float4* b4 = reinterpret_cast<const float4*>(b);
        for (int64_t i = tid; i < total; i += stride) {
            float4 v = y4[i];
            const float4 bb = b4[i % n4];
            v.x = epi(v.x, bb.x, mult, slope);
            v.y = epi(v.y, bb.y, mult, slope);
            v.z = epi(v.z, bb.z, mult, slope);
            v.w = epi(v.w, bb.w, mult, slope);
            y4[i] = v;
        }
    } else {
        const int64_t total = M * N;
        for (int64_t i = tid; i < total; i += stride) y[i] = epi(y[i], b[i % N], mult, slope);
    }
}

torch::Tensor gemm_mul_lrelu(torch::Tensor x, torch::Tensor w, torch::Tensor b, double multiplier,
                             double negative_slope) {
    TORCH_CHECK(x.device().is_cuda() && w.device().is_cuda() && b.device().is_cuda(),
                "gemm_mul_lrelu: inputs must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 &&
                    b.scalar_type() == torch::kFloat32,
                "gemm_mul_lrelu: inputs must be float32");
    TORCH_CHECK(x.is_contiguous() && w.is_contiguous() && b.is_contiguous(), "gemm_mul_lrelu: inputs must be contiguous");
    TORCH_CHECK(x.dim() >= 1 && w.dim() == 2 && b.dim() == 1, "gemm_mul_lrelu: bad ranks");
    const int64_t K = x.size(x.dim() - 1);
    const int64_t N = w.size(0);
    TORCH_CHECK(w.size(1) == K && b.size(0) == N, "gemm_mul_lrelu: shapes do not match");
    std::vector<int64_t> shape;
    for (int64_t d = 0; d + 1 < x.dim(); ++d) shape.push_back(x.size(d));
    shape.push_back(N);
    auto y = torch::empty(shape, x.options());
    const int64_t M = K > 0 ? x.numel() / K : 0;
    if (M == 0 || N == 0) return y;
    TORCH_CHECK(K > 0, "gemm_mul_lrelu: in_features must be positive");
    TORCH_CHECK(M <= 0x7fffffffLL && N <= 0x7fffffffLL && K <= 0x7fffffffLL, "gemm_mul_lrelu: matrix too large");

    cublasHandle_t h = gemm_handle(x.device().index());
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    cublasStatus_t st = cublasSetStream(h, stream);
    TORCH_CHECK(st == CUBLAS_STATUS_SUCCESS, "gemm: cublasSetStream failed: ", cublasGetStatusString(st));
    const float alpha = 1.0f, beta = 0.0f;
    // Column-major view: Y^T (N x M) = W (N x K, stored as K x N column-major, so OP_T) * X^T (K x M).
    st = cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha, w.data_ptr<float>(), (int)K,
                     x.data_ptr<float>(), (int)K, &beta, y.data_ptr<float>(), (int)N);
    TORCH_CHECK(st == CUBLAS_STATUS_SUCCESS, "gemm: cublasSgemm failed: ", cublasGetStatusString(st));

    float* yp = y.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    const bool vec = N % 4 == 0 && reinterpret_cast<uintptr_t>(yp) % 16 == 0 && reinterpret_cast<uintptr_t>(bp) % 16 == 0;
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, x.device().index());
    if (sms < 1) sms = 1;
    const int64_t work = vec ? M * (N >> 2) : M * N;
    const int64_t wanted = (work + kThreads - 1) / kThreads;
    const int64_t cap = (int64_t)sms * 16;
    const int blocks = (int)(wanted < cap ? wanted : cap);
    bias_mul_lrelu_kernel<<<blocks, kThreads, 0, stream>>>(yp, bp, M, N, (float)multiplier, (float)negative_slope, vec);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "gemm_mul_lrelu: epilogue launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

cpp_source = (
    "torch::Tensor gemm_mul_lrelu(torch::Tensor x, torch::Tensor w, torch::Tensor b, double multiplier, "
    "double negative_slope);"
)

gemm_ext = load_inline(
    name="kb_l2_12_gemm_mul_lrelu",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["gemm_mul_lrelu"],
    extra_cuda_cflags=["-O3"],
    extra_ldflags=["-lcublas"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gemm_ext.gemm_mul_lrelu(
            x.contiguous(), self.gemm.weight, self.gemm.bias, self.multiplier, self.negative_slope
        )
