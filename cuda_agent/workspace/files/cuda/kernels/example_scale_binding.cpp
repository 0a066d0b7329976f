// Worked example: the Python-facing side of example_scale.cu.
#include "binding_registry.h"

#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

void example_scale_launch(const float* x, float* y, float alpha, int64_t n, cudaStream_t stream);

static at::Tensor example_scale(const at::Tensor& x, double alpha) {
    TORCH_CHECK(x.is_cuda(), "example_scale: x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == at::kFloat, "example_scale: x must be float32");
    TORCH_CHECK(x.is_contiguous(), "example_scale: x must be contiguous");
    at::Tensor y = at::empty_like(x);
    example_scale_launch(x.data_ptr<float>(), y.data_ptr<float>(), static_cast<float>(alpha), x.numel(),
                         c10::cuda::getCurrentCUDAStream());
    return y;
}

REGISTER_BINDING(example_scale, [](pybind11::module_& m) {
    m.def("example_scale", &example_scale, "y = alpha * x (worked example)");
});
