// Worked example (not part of any task): y = alpha * x, elementwise, float32.
// Kernel files take raw pointers and a stream and include no torch headers, so they compile in
// about a second; tensors are handled in the matching *_binding.cpp.
#include <cuda_runtime.h>
#include <cstdint>

__global__ void example_scale_kernel(const float* __restrict__ x, float* __restrict__ y, float alpha, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (; i < n; i += stride) y[i] = alpha * x[i];
}

void example_scale_launch(const float* x, float* y, float alpha, int64_t n, cudaStream_t stream) {
    if (n == 0) return;
    int threads = 256;
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks > 65535 * 8) blocks = 65535 * 8;
    example_scale_kernel<<<(unsigned)blocks, threads, 0, stream>>>(x, y, alpha, n);
}
