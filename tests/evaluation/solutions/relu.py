import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "relu_forward: x must be a CPU tensor");
    TORCH_CHECK(x.dtype() == torch::kFloat32, "relu_forward: x must be float32");
    TORCH_CHECK(x.is_contiguous(), "relu_forward: x must be contiguous");
    auto out = torch::empty_like(x);
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const int64_t n = x.numel();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const float v = src[i];
        // Written as `v < 0 ? 0 : v` so that NaN passes through, as it does in torch.relu.
        dst[i] = v < 0.0f ? 0.0f : v;
    }
    return out;
}
"""

relu_ext = load_inline(
    name="examples_relu_cpu",
    cpp_sources=cpp_source,
    functions=["relu_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_forward(x.contiguous())
