#include "binding_registry.h"
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

void scale_add_launch(const float* x, const float* y, float* out, float alpha, int64_t n, cudaStream_t stream);

static at::Tensor scale_add(const at::Tensor& x, const at::Tensor& y, double alpha) {
    TORCH_CHECK(x.is_cuda() && y.is_cuda(), "scale_add: CUDA tensors");
    TORCH_CHECK(x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat, "scale_add: float32");
    TORCH_CHECK(x.is_contiguous() && y.is_contiguous() && x.sizes() == y.sizes(), "scale_add: contiguous, one shape");
    at::Tensor out = at::empty_like(x);
    scale_add_launch(x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(), static_cast<float>(alpha),
                     x.numel(), c10::cuda::getCurrentCUDAStream());
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "scale_add: kernel launch failed");
    return out;
}

REGISTER_BINDING(scale_add, [](pybind11::module_& m) { m.def("scale_add", &scale_add, "x * alpha + y"); });
