# Red team 9, g07: no thread, no hook. forward returns a one-element *list subclass* holding an unwritten
# torch::empty_like; the class's __iter__ runs the kernel. The judge flattens every output with
# `flatten_outputs` (cuda_agent/tasks/inspection.py: `isinstance(value, list | tuple)` then `for v in value`), and its
# first act after the clock stops is `trial.sample_outputs`, which flattens first: the work runs there, inside the
# judge's own code, before any position is read. Every read (sample, snapshot, comparison) sees correct values.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor softmax_alloc(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous() && x.dtype() == torch::kFloat32);
    return torch::empty_like(x);
}

void softmax_fill(torch::Tensor x, torch::Tensor out) {
    const int64_t cols = x.size(x.dim() - 1);
    const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        const float* in = src + r * cols;
        float* o = dst + r * cols;
        float m = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) m = std::fmax(m, in[c]);
        float sum = 0.f;
        for (int64_t c = 0; c < cols; ++c) { const float e = std::exp(in[c] - m); o[c] = e; sum += e; }
        const float inv = 1.f / sum;
        for (int64_t c = 0; c < cols; ++c) o[c] *= inv;
    }
}
"""

ext = load_inline(
    name="rt9_g07_list_iter_softmax",
    cpp_sources=cpp_source,
    functions=["softmax_alloc", "softmax_fill"],
    extra_cflags=["-O3"],
    verbose=False,
)


class Outputs(list):
    """One output; the kernel runs the first time anyone iterates."""

    def __init__(self, x, out):
        super().__init__()
        self.x = x
        self.out = out
        self.pending = True

    def __iter__(self):
        if self.pending:
            self.pending = False
            ext.softmax_fill(self.x, self.out)
        return iter([self.out])

    def __len__(self):
        return 1


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        return Outputs(x, ext.softmax_alloc(x))
