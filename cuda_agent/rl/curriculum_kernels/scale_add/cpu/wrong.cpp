// add: alpha is never applied
#include "binding_registry.h"

static at::Tensor scale_add(const at::Tensor& x, const at::Tensor& y, double alpha) {
    at::Tensor out = at::empty_like(x);
    const float *a = x.data_ptr<float>(), *b = y.data_ptr<float>();
    float* c = out.data_ptr<float>();
    const float s = alpha;
    const int64_t n = x.numel();
#pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
    return out;
}

REGISTER_BINDING(scale_add, [](pybind11::module_& m) { m.def("scale_add", &scale_add); });
