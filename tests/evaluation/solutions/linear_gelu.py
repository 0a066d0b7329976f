# Broken on purpose (tests/evaluation): the compiler refuses an unknown -m flag at once (no header is parsed: the test
# stays fast, and a failed build is never cached), so the verdict is 'compile_error'.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
torch::Tensor linear_gelu_forward(torch::Tensor x);
"""

linear_gelu_ext = load_inline(
    name="tests_evaluation_broken_linear_gelu",
    cpp_sources=cpp_source,
    functions=["linear_gelu_forward"],
    extra_cflags=["-mavx_broken_on_purpose"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear_gelu_ext.linear_gelu_forward(x.contiguous())
