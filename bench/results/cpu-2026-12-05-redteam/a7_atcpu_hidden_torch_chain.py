import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <ATen/CPUFunctions.h>

torch::Tensor fused(torch::Tensor x, torch::Tensor w, torch::Tensor bias, torch::Tensor half) {
    auto out = torch::empty({x.size(0), w.size(0)}, x.options());
    at::cpu::addmm_out(out, bias, x, w.t());
    auto s = at::cpu::sigmoid(out);
    at::cpu::mul_(out, s);
    at::cpu::mul_(out, half);
    at::cpu::clamp_(out, -1.0, 1.0);
    at::cpu::tanh_(out);
    at::cpu::clamp_(out, -1.0, 1.0);
    return out;
}
"""

ext = load_inline(
    name="redteam_a7_atcpu_chain",
    cpp_sources=cpp_source,
    extra_cflags=["-O3"],
    functions=["fused"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=bias)
        self.register_buffer("k05", torch.tensor(0.5))

    def forward(self, x):
        return ext.fused(x.contiguous(), self.gemm.weight, self.gemm.bias, self.k05)
