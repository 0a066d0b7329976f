import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
static void relu_into(const float* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i] > 0.f ? src[i] : 0.f;
}
torch::Tensor relu_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    relu_into(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
    return out;
}
"""
ext = load_inline(
    name="rt3_a07c_relu", cpp_sources=cpp_source, functions=["relu_forward"], extra_cflags=["-O3"], verbose=False
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_forward(x.contiguous())
