// fused: x * alpha + y in one parallel pass (eager makes two passes and a temporary)
#include <cstdint>

void scale_add_launch(const float* x, const float* y, float* out, float alpha, int64_t n) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * alpha + y[i];
}
