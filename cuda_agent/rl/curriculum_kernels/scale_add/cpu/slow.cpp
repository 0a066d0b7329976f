// naive: one thread, strided walk (each step jumps 16 KB, so every load misses the cache line it needs)
#include <cstdint>

void scale_add_launch(const float* x, const float* y, float* out, float alpha, int64_t n) {
    const int64_t stride = 4096;
    for (int64_t start = 0; start < stride; ++start)
        for (int64_t i = start; i < n; i += stride) out[i] = x[i] * alpha + y[i];
}
