import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

at::Tensor& (*g_add_out)(at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Scalar&) = nullptr;

namespace at {
namespace cpu {
TORCH_API Tensor& add_out(Tensor& out, const Tensor& self, const Tensor& other, const Scalar& alpha);
struct Hook { Hook() { ::g_add_out = &add_out; } };
static Hook hook_;
}
}

torch::Tensor scale_add_forward(torch::Tensor x, torch::Tensor y, double alpha) {
    TORCH_CHECK(x.is_contiguous() && y.is_contiguous(), "contiguous inputs expected");
    auto out = torch::empty_like(x);
    g_add_out(out, y, x, at::Scalar(alpha));
    return out;
}
"""

ext = load_inline(
    name="redteam_a9_declared_add",
    cpp_sources=cpp_source,
    functions=["scale_add_forward"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return ext.scale_add_forward(x.contiguous(), y.contiguous(), self.alpha)
