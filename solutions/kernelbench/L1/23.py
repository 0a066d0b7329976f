"""KernelBench level 1, problem 23 (23_Softmax): softmax over dim 1 of a (4096, 393216) float32 input.

A row is 1.5 MB: too big for one SM's shared memory, small enough for a thread-block cluster's.
Main path: a cluster of up to 8 CTAs (one per SM, 1024 threads) owns one row; each CTA copies its
slice of the row into shared memory once (the only global read) while keeping an online
(max, sum of exp(x - max)) per thread, the cluster merges the CTAs' pairs through distributed shared
memory (one cluster barrier), and each CTA writes exp(x - max) / sum from shared memory. HBM traffic
is one read and one write, where a row-per-block kernel reads the row two or three times. exp is the
accurate expf (no fast math); the exps overlap the memory traffic of both phases.

Fallback (rows too long for the cluster's shared memory, or a device without clusters): one block
per row, an online (max, sum) pass and a write pass.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <cstdint>
#include <cmath>

namespace cg = cooperative_groups;

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxCluster = 8;  // the portable cluster size limit
constexpr int kLoadUnroll = 6;  // float4 loads in flight per thread while filling shared memory

__device__ __forceinline__ float max4(float4 v) { return fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)); }

// Merge a running (max, sum of exp(x - max)) pair with another. (-inf, 0) is the empty pair.
__device__ __forceinline__ void merge_stat(float& m, float& s, float om, float os) {
    const float nm = fmaxf(m, om);
    if (nm == -INFINITY) return;  // both empty (or only -inf seen): keep (-inf, 0)
    s = s * expf(m - nm) + os * expf(om - nm);
    m = nm;
}

// Raise a thread's running max to bm (if larger), rescaling its running sum.
__device__ __forceinline__ void online_rescale(float& m, float& s, float bm) {
    if (bm > m) {
        s *= expf(m - bm);  // m = -inf: s is 0 and stays 0
        m = bm;
    }
}

__device__ __forceinline__ float exp_sum4(float4 v, float m) {
    return (expf(v.x - m) + expf(v.y - m)) + (expf(v.z - m) + expf(v.w - m));
}

// Merge the (m, s) pairs of a kThreads block; the result is valid in warp 0 (every lane).
__device__ __forceinline__ void block_merge_warp0(float& m, float& s, float* red_m, float* red_s) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float om = __shfl_xor_sync(0xffffffffu, m, o);
        const float os = __shfl_xor_sync(0xffffffffu, s, o);
        merge_stat(m, s, om, os);
    }
    if ((threadIdx.x & 31) == 0) {
        red_m[threadIdx.x >> 5] = m;
        red_s[threadIdx.x >> 5] = s;
    }
    __syncthreads();
    if (threadIdx.x < 32) {
        m = threadIdx.x < kWarps ? red_m[threadIdx.x] : -INFINITY;
        s = threadIdx.x < kWarps ? red_s[threadIdx.x] : 0.0f;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float om = __shfl_xor_sync(0xffffffffu, m, o);
            const float os = __shfl_xor_sync(0xffffffffu, s, o);
            merge_stat(m, s, om, os);
        }
    }
}

// One cluster per row; CTA `rank` of the cluster owns columns [rank * chunk, min(cols, (rank + 1) * chunk)).
// VEC: cols and chunk are multiples of 4 and both pointers are 16-byte aligned.
template <bool VEC>
__global__ void __launch_bounds__(kThreads, 1)
softmax_cluster_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols, int chunk) {
    extern __shared__ float4 smem4[];
    float* smem = reinterpret_cast<float*>(smem4);
    __shared__ float red_m[kWarps];
    __shared__ float red_s[kWarps];
    __shared__ float cta_stat[2];  // this CTA's (max, sum), read by the whole cluster
    __shared__ float row_stat[2];  // the row's (max, sum)

    cg::cluster_group cluster = cg::this_cluster();
    const int csize = (int)cluster.num_blocks();
    const int rank = (int)cluster.block_rank();
    const int64_t row = (int64_t)(blockIdx.x / csize);
    const int64_t start = (int64_t)rank * chunk;
    const int64_t rem = cols - start;
    const int len = rem <= 0 ? 0 : (rem < chunk ? (int)rem : chunk);
    const float* __restrict__ src = x + row * cols + start;
    float* __restrict__ dst = y + row * cols + start;
    const int tid = threadIdx.x;

    // Phase 1: global -> shared memory (the only global read), with a running (max, sum of exp) per
    // thread, updated once per batch of loads so the exps overlap the next loads in flight.
    float m = -INFINITY, s = 0.0f;
    if (VEC) {
        const int n4 = len >> 2;
        const float4* __restrict__ s4 = reinterpret_cast<const float4*>(src);
        int i = tid;
        for (; i + (kLoadUnroll - 1) * kThreads < n4; i += kLoadUnroll * kThreads) {
            float4 v[kLoadUnroll];
#pragma unroll
            for (int u = 0; u < kLoadUnroll; ++u) v[u] = s4[i + u * kThreads];
            float bm = -INFINITY;
#pragma unroll
            for (int u = 0; u < kLoadUnroll; ++u) {
                smem4[i + u * kThreads] = v[u];
                bm = fmaxf(bm, max4(v[u]));
            }
            online_rescale(m, s, bm);
            if (m != -INFINITY) {  // all -inf so far: they add nothing (and -inf - -inf would be NaN)
#pragma unroll
                for (int u = 0; u < kLoadUnroll; ++u) s += exp_sum4(v[u], m);
            }
        }
        for (; i < n4; i += kThreads) {
            const float4 v = s4[i];
            smem4[i] = v;
            online_rescale(m, s, max4(v));
            if (m != -INFINITY) s += exp_sum4(v, m);
        }
    } else {
        for (int i = tid; i < len; i += kThreads) {
            const float v = src[i];
            smem[i] = v;
            online_rescale(m, s, v);
            if (m != -INFINITY) s += expf(v - m);
        }
    }
    block_merge_warp0(m, s, red_m, red_s);
    if (tid == 0) {
        cta_stat[0] = m;
        cta_stat[1] = s;
    }
    cluster.sync();  // every CTA's cta_stat is written and visible cluster-wide

    if (tid < 32) {
        float rm = -INFINITY, rs = 0.0f;
        if (tid < csize) {
            const float* remote = cluster.map_shared_rank(cta_stat, tid);
            rm = remote[0];
            rs = remote[1];
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float om = __shfl_xor_sync(0xffffffffu, rm, o);
            const float os = __shfl_xor_sync(0xffffffffu, rs, o);
            merge_stat(rm, rs, om, os);
        }
        if (tid == 0) {
            row_stat[0] = rm;
            row_stat[1] = rs;
        }
    }
    __syncthreads();
    // Done reading other CTAs' shared memory: signal it now, and wait only before exiting
    // (a CTA's shared memory must outlive every remote read of it).
    cluster.barrier_arrive();
    const float mx = row_stat[0];
    const float inv = 1.0f / row_stat[1];

    // Phase 2: shared memory -> global, exp(x - max) / sum. Each thread revisits the elements it stored.
    if (VEC) {
        const int n4 = len >> 2;
        float4* __restrict__ d4 = reinterpret_cast<float4*>(dst);
        for (int i = tid; i < n4; i += kThreads) {
            float4 v = smem4[i];
            v.x = expf(v.x - mx) * inv;
            v.y = expf(v.y - mx) * inv;
            v.z = expf(v.z - mx) * inv;
            v.w = expf(v.w - mx) * inv;
            d4[i] = v;
        }
    } else {
        for (int i = tid; i < len; i += kThreads) dst[i] = expf(smem[i] - mx) * inv;
    }
    cluster.barrier_wait();
}

// Fallback: one block per row. Pass 1 keeps a running (max, sum of exp(x - max)) per thread and merges
// them; pass 2 writes exp(x - max) / sum.
__global__ void __launch_bounds__(kThreads) softmax_row_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                               int64_t cols) {
    __shared__ float red_m[kWarps];
    __shared__ float red_s[kWarps];
    __shared__ float stat[2];
    const int64_t row = blockIdx.x;
    const float* __restrict__ src = x + row * cols;
    float* __restrict__ dst = y + row * cols;
    const int tid = threadIdx.x;
    float m = -INFINITY, s = 0.0f;
    for (int64_t i = tid; i < cols; i += kThreads) {
        const float v = src[i];
        online_rescale(m, s, v);
        if (m != -INFINITY) s += expf(v - m);
    }
    block_merge_warp0(m, s, red_m, red_s);
    if (tid == 0) {
        stat[0] = m;
        stat[1] = s;
    }
    __syncthreads();
    const float mx = stat[0];
    const float inv = 1.0f / stat[1];
    for (int64_t i = tid; i < cols; i += kThreads) dst[i] = expf(src[i] - mx) * inv;
}

template <bool VEC>
static bool launch_cluster(const float* xp, float* yp, int64_t rows, int64_t cols, int device, cudaStream_t stream) {
    int cluster_ok = 0;
    cudaDeviceGetAttribute(&cluster_ok, cudaDevAttrClusterLaunch, device);
    int smem_optin = 0;
    cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (!cluster_ok || smem_optin <= 0) return false;
    const int64_t budget = (int64_t)smem_optin - 1024;  // room for the static shared variables
    int csize = 1;
    int64_t chunk = 0;
    for (; csize <= kMaxCluster; csize *= 2) {
        chunk = ((cols + csize - 1) / csize + 3) / 4 * 4;
        if (chunk * (int64_t)sizeof(float) <= budget) break;
    }
    if (csize > kMaxCluster) return false;
    if (rows * csize > 0x7fffffffLL) return false;
    const size_t smem_bytes = (size_t)chunk * sizeof(float);
    auto kernel = softmax_cluster_kernel<VEC>;
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_bytes);
    TORCH_CHECK(err == cudaSuccess, "softmax: cudaFuncSetAttribute failed: ", cudaGetErrorString(err));
    if (csize > 8) {  // only if kMaxCluster is raised past the portable limit (H100/H200 allow 16)
        err = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
        TORCH_CHECK(err == cudaSuccess, "softmax: cudaFuncSetAttribute failed: ", cudaGetErrorString(err));
    }

    cudaLaunchConfig_t config = {};
    config.gridDim = dim3((unsigned)(rows * csize), 1, 1);
    config.blockDim = dim3(kThreads, 1, 1);
    config.dynamicSmemBytes = smem_bytes;
    config.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)csize;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    config.attrs = attr;
    config.numAttrs = 1;

    int clusters = 0;
    err = cudaOccupancyMaxActiveClusters(&clusters, kernel, &config);
    if (err != cudaSuccess || clusters < 1) {
        cudaGetLastError();  // clear the error state left by the query
        return false;
    }
    err = cudaLaunchKernelEx(&config, kernel, xp, yp, cols, (int)chunk);
    TORCH_CHECK(err == cudaSuccess, "softmax: cluster launch failed: ", cudaGetErrorString(err));
    err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "softmax: cluster kernel failed: ", cudaGetErrorString(err));
    return true;
}

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cuda(), "softmax_forward: x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "softmax_forward: x must be float32");
    TORCH_CHECK(x.dim() == 2, "softmax_forward: x must be 2-D (batch, features)");
    TORCH_CHECK(x.is_contiguous(), "softmax_forward: x must be contiguous");
    auto y = torch::empty_like(x);
    const int64_t rows = x.size(0);
    const int64_t cols = x.size(1);
    if (rows == 0 || cols == 0) return y;
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const int device = x.device().index();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const bool vec = cols % 4 == 0 && reinterpret_cast<uintptr_t>(xp) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(yp) % 16 == 0;
    const bool done = vec ? launch_cluster<true>(xp, yp, rows, cols, device, stream)
                          : launch_cluster<false>(xp, yp, rows, cols, device, stream);
    if (!done) {
        TORCH_CHECK(rows <= 0x7fffffffLL, "softmax_forward: too many rows");
        softmax_row_kernel<<<(unsigned)rows, kThreads, 0, stream>>>(xp, yp, cols);
        const cudaError_t err = cudaGetLastError();
        TORCH_CHECK(err == cudaSuccess, "softmax: row kernel launch failed: ", cudaGetErrorString(err));
    }
    return y;
}
"""

cpp_source = "torch::Tensor softmax_forward(torch::Tensor x);"

softmax_ext = load_inline(
    name="kb_l1_23_softmax",
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
