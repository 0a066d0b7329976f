#include <cstdint>
void relu_launch(const float* x, float* y, int64_t n) {
#pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
