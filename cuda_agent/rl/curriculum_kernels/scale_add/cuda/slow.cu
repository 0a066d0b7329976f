// unfused: three passes, out = x, out *= alpha, out += y (more memory traffic than eager's two)
#include <cuda_runtime.h>
#include <cstdint>

__global__ void copy_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = x[i];
}

__global__ void scale_kernel(float* __restrict__ out, float alpha, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] *= alpha;
}

__global__ void add_kernel(const float* __restrict__ y, float* __restrict__ out, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] += y[i];
}

void scale_add_launch(const float* x, const float* y, float* out, float alpha, int64_t n, cudaStream_t stream) {
    if (n == 0) return;
    const int64_t blocks = (n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096;
    copy_kernel<<<(unsigned)blocks, 256, 0, stream>>>(x, out, n);
    scale_kernel<<<(unsigned)blocks, 256, 0, stream>>>(out, alpha, n);
    add_kernel<<<(unsigned)blocks, 256, 0, stream>>>(y, out, n);
}
