import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <ATen/CPUFunctions.h>

torch::Tensor fused(torch::Tensor x, torch::Tensor w, torch::Tensor bias) {
    auto out = torch::empty({x.size(0), w.size(0)}, x.options());
    at::cpu::addmm_out(out, bias, x, w.t());
    at::cpu::clamp_min_(out, 0);
    return out;
}
"""

ext = load_inline(
    name="redteam_a3_atcpu",
    cpp_sources=cpp_source,
    extra_cflags=["-O3"],
    functions=["fused"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return ext.fused(x.contiguous(), self.gemm.weight, self.bias)
