# Red team 7, e03 (pure Python, kernelbench): the kernel call sits in the `finally` of a suspended generator that
# is hung on the previous output; the judge freeing that output (after the timer stopped) closes the generator and
# runs the kernel. A generator's finally is a __del__ by another name.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

void softmax_into(torch::Tensor x, torch::Tensor out) {
    TORCH_CHECK(x.is_contiguous() && out.is_contiguous() && x.dtype() == torch::kFloat32);
    const int64_t cols = x.size(x.dim() - 1);
    const int64_t rows = x.numel() / cols;
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
#pragma omp parallel for schedule(static)
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

void check_args(torch::Tensor x, torch::Tensor out) {
    TORCH_CHECK(x.sizes() == out.sizes() && x.dtype() == torch::kFloat32);
}
"""

ext = load_inline(
    name="rt7_e03_generator_softmax",
    cpp_sources=cpp_source,
    functions=["softmax_into", "check_args"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


def _job():
    x, out = yield
    try:
        yield
    finally:
        ext.softmax_into(x, out)


def _factory():
    while True:
        yield _job()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.jobs = _factory()
        self.prev = torch.empty(0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        ext.check_args(x, out)
        job = next(self.jobs)
        next(job)
        job.send((x, out))
        self.prev.job = job  # lives as long as the previous output does
        self.prev = out
        return out
