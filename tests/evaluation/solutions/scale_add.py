# Broken on purpose (tests/evaluation): a wrong constant, so the verdict is 'incorrect'.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor scale_add_forward(torch::Tensor x, torch::Tensor y, double alpha) {
    TORCH_CHECK(x.device().is_cpu() && y.device().is_cpu(), "scale_add_forward: inputs must be CPU tensors");
    TORCH_CHECK(x.dtype() == torch::kFloat32 && y.dtype() == torch::kFloat32, "scale_add_forward: inputs must be float32");
    TORCH_CHECK(x.is_contiguous() && y.is_contiguous(), "scale_add_forward: inputs must be contiguous");
    // No broadcasting: the problem adds tensors of one shape, and silently reading past y would be worse than failing.
    TORCH_CHECK(x.dim() == y.dim(), "scale_add_forward: x and y must have the same shape");
    for (int64_t d = 0; d < x.dim(); ++d) {
        TORCH_CHECK(x.size(d) == y.size(d), "scale_add_forward: x and y must have the same shape");
    }
    auto out = torch::empty_like(x);
    const float* xp = x.data_ptr<float>();
    const float* yp = y.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    // torch multiplies a float32 tensor by a Python scalar in float32, so round alpha the same way.
    const float a = static_cast<float>(alpha);
    const int64_t n = x.numel();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        dst[i] = xp[i] * a + yp[i];
    }
    return out;
}
"""

scale_add_ext = load_inline(
    name="examples_scale_add_cpu",
    cpp_sources=cpp_source,
    functions=["scale_add_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = float(alpha) + 0.5  # wrong on purpose

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return scale_add_ext.scale_add_forward(x.contiguous(), y.contiguous(), self.alpha)
