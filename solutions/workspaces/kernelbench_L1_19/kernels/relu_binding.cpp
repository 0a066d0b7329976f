// Python-facing ReLU: checks, allocation, launch on the current stream.
#include "binding_registry.h"

#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

void relu_launch(const float* x, float* y, int64_t n, int sm_count, cudaStream_t stream);

static at::Tensor relu(const at::Tensor& x) {
    TORCH_CHECK(x.is_cuda(), "relu: x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == at::kFloat, "relu: x must be float32");
    TORCH_CHECK(x.is_contiguous(), "relu: x must be contiguous");
    static int sm_count = [] {
        int device = 0, count = 0;
        cudaGetDevice(&device);
        cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
        return count > 0 ? count : 132;
    }();
    at::Tensor y = at::empty_like(x);
    relu_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), sm_count, c10::cuda::getCurrentCUDAStream());
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "relu: kernel launch failed");
    return y;
}

REGISTER_BINDING(relu, [](pybind11::module_& m) { m.def("relu", &relu, "y = relu(x), float32, contiguous"); });
