// unfused: three passes, out = x, then out *= alpha, then out += y (more memory traffic than eager's two)
#include <cuda_runtime.h>
#include <cstdint>

__global__ void pass_kernel(const float* __restrict__ src, float* __restrict__ out, float alpha, int64_t n, int op) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = op == 0 ? src[i] : op == 1 ? out[i] * alpha : out[i] + src[i];
}

void scale_add_launch(const float* x, const float* y, float* out, float alpha, int64_t n, cudaStream_t stream) {
    if (n == 0) return;
    const unsigned blocks = (unsigned)((n + 255) / 256);
    pass_kernel<<<blocks, 256, 0, stream>>>(x, out, alpha, n, 0);
    pass_kernel<<<blocks, 256, 0, stream>>>(x, out, alpha, n, 1);
    pass_kernel<<<blocks, 256, 0, stream>>>(y, out, alpha, n, 2);
}
