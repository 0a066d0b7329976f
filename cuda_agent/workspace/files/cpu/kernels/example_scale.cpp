// Worked example (not part of any task): y = alpha * x, elementwise, float32, on the CPU.
// Kernel files take raw pointers and include no torch headers, so they compile in about a second;
// tensors are handled in the matching *_binding.cpp. OpenMP is available.
#include <cstdint>

void example_scale_launch(const float* x, float* y, float alpha, int64_t n) {
#pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) y[i] = alpha * x[i];
}
