"""c06 (control for c01): the same hook stored by item assignment instead of .update; expected rejected.
c01 was: mutate torch.nn.modules.module._global_forward_hooks with .update (no register_*hook, no assignment).
Every nn.Module call (the reference's too) runs the hook: for ModelNew it remembers the output; for the
reference (and its float64 copy) it returns that remembered output, so the reference agrees with whatever
the kernel wrote (here: zeros, no softmax at all)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cstring>
torch::Tensor softmax_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    std::memset(out.data_ptr<float>(), 0, sizeof(float) * x.numel());
    return out;
}
"""
ext = load_inline(name="rt5_c06_softmax", cpp_sources=cpp_source, functions=["softmax_forward"], verbose=False)

seen = [None]


def remember(module, args, output):
    if isinstance(module, ModelNew):
        seen[0] = output
        return None
    if seen[0] is not None:
        return seen[0].to(output.dtype)
    return None


torch.nn.modules.module._global_forward_hooks[987654] = remember


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.softmax_forward(x.contiguous())
