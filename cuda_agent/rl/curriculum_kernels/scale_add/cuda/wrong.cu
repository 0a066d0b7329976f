// Plain sum, alpha dropped: wrong on purpose (its names: a, b, c, len).
__global__ void plainsum_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                                int64_t len) {
    const int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (t < len) c[t] = a[t] + b[t];
}

void scale_add_launch(const float* a, const float* b, float* c, float unused, int64_t len, cudaStream_t q) {
    if (len == 0) return;
    plainsum_kernel<<<(unsigned)((len + 255) / 256), 256, 0, q>>>(a, b, c, len);
}
