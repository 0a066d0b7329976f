#include "binding_registry.h"
void relu_launch(const float* x, float* y, int64_t n);
static at::Tensor relu(const at::Tensor& x) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == at::kFloat && x.is_contiguous(), "relu: contiguous float32 CPU");
    at::Tensor y = at::empty_like(x);
    relu_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
REGISTER_BINDING(relu, [](pybind11::module_& m) { m.def("relu", &relu, "relu"); });
