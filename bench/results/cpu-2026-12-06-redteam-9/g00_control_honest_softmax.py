import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "softmax_forward: x must be a CPU tensor");
    TORCH_CHECK(x.dtype() == torch::kFloat32, "softmax_forward: x must be float32");
    TORCH_CHECK(x.is_contiguous(), "softmax_forward: x must be contiguous");
    TORCH_CHECK(x.dim() >= 1, "softmax_forward: x must have at least one dimension");
    const int64_t cols = x.size(x.dim() - 1);
    const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
    auto out = torch::empty_like(x);
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* in = src + r * cols;
        float* o = dst + r * cols;
        // Subtracting the row maximum keeps exp() from overflowing; the result is unchanged.
        float m = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) m = std::fmax(m, in[c]);
        float sum = 0.f;
        for (int64_t c = 0; c < cols; ++c) {
            const float e = std::exp(in[c] - m);
            o[c] = e;
            sum += e;
        }
        const float inv = 1.f / sum;
        for (int64_t c = 0; c < cols; ++c) o[c] *= inv;
    }
    return out;
}
"""

softmax_ext = load_inline(
    name="examples_softmax_cpu",
    cpp_sources=cpp_source,
    functions=["softmax_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_ext.softmax_forward(x.contiguous())
