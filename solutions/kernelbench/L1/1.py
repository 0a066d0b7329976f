"""KernelBench level 1, problem 1 (1_Square_matrix_multiplication_): C = A @ B with A, B of shape (4096, 4096).

A float32 GEMM through cuBLAS SGEMM (cuBLAS is allowed for GEMM) with FP32 math: the handle's math
mode is CUBLAS_DEFAULT_MATH, which never uses TF32 tensor cores. Row-major C = A B is computed as
column-major C^T = B^T A^T, so no transposes are materialised. The extension owns one cuBLAS handle
per device, created on first use and bound to the current stream on every call.
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

static cublasHandle_t gemm_handle(int device) {
    static cublasHandle_t handles[64] = {};
    TORCH_CHECK(device >= 0 && device < 64, "matmul: unsupported device index ", device);
    if (handles[device] == nullptr) {
        cublasHandle_t h = nullptr;
        cublasStatus_t st = cublasCreate(&h);
        TORCH_CHECK(st == CUBLAS_STATUS_SUCCESS, "matmul: cublasCreate failed: ", cublasGetStatusString(st));
        st = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);  // FP32 math, no TF32
        TORCH_CHECK(st == CUBLAS_STATUS_SUCCESS, "matmul: cublasSetMathMode failed: ", cublasGetStatusString(st));
        handles[device] = h;
    }
    return handles[device];
}

torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.device().is_cuda() && b.device().is_cuda(), "matmul_forward: inputs must be CUDA tensors");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32,
                "matmul_forward: inputs must be float32");
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2, "matmul_forward: inputs must be 2-D");
    TORCH_CHECK(a.is_contiguous() && b.is_contiguous(), "matmul_forward: inputs must be contiguous");
    const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
    TORCH_CHECK(b.size(0) == K, "matmul_forward: inner dimensions differ");
    TORCH_CHECK(M > 0 && N > 0 && K > 0, "matmul_forward: empty matrices are not supported");
    TORCH_CHECK(M <= 0x7fffffffLL && N <= 0x7fffffffLL && K <= 0x7fffffffLL, "matmul_forward: matrix too large");
    auto c = torch::empty({M, N}, a.options());
    cublasHandle_t h = gemm_handle(a.device().index());
    cublasStatus_t st = cublasSetStream(h, at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(st == CUBLAS_STATUS_SUCCESS, "matmul: cublasSetStream failed: ", cublasGetStatusString(st));
    const float alpha = 1.0f, beta = 0.0f;
    // Column-major view: C^T (N x M) = B^T (N x K) * A^T (K x M).
    st = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha, b.data_ptr<float>(), (int)N,
                     a.data_ptr<float>(), (int)K, &beta, c.data_ptr<float>(), (int)N);
    TORCH_CHECK(st == CUBLAS_STATUS_SUCCESS, "matmul: cublasSgemm failed: ", cublasGetStatusString(st));
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "matmul: launch failed: ", cudaGetErrorString(err));
    return c;
}
"""

cpp_source = "torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b);"

matmul_ext = load_inline(
    name="kb_l1_1_matmul",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["matmul_forward"],
    extra_cuda_cflags=["-O3"],
    extra_ldflags=["-lcublas"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matmul_ext.matmul_forward(A.contiguous(), B.contiguous())
