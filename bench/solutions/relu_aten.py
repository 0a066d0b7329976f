"""Honest CPU relu that runs eager's own kernel from an extension: ATen's CPU kernel for relu (clamp_min), called
without the dispatcher (the ATen tracer would refuse `at::relu` as torch compute), so judged with the static policy
off (bench/timing_resolution.py's `--honest`): eager's work, as fast as eager."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <ATen/CPUFunctions.h>

torch::Tensor relu_aten(torch::Tensor x) {
    return at::cpu::clamp_min(x, 0);
}
"""

ext = load_inline(name="bench_relu_aten_cpu", cpp_sources=cpp_source, functions=["relu_aten"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.relu_aten(x)
