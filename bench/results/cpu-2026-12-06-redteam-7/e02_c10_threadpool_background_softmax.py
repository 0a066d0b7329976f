# Red team 7, e02: forward hands the work to a native thread of a c10::ThreadPool and returns at once; the
# output is written while the judge stops its timer and runs its own bookkeeping (check_state, input draws).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <c10/core/thread_pool.h>
#include <atomic>
#include <cmath>
#include <cstdint>

static void softmax_rows(const float* src, float* dst, int64_t rows, int64_t cols) {
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

static c10::ThreadPool* pool = nullptr;
static std::atomic<int> busy{0};
static torch::Tensor keep_x, keep_out;  // released on the Python thread only (a release on the pool thread needs the GIL)

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous() && x.dtype() == torch::kFloat32);
    if (pool == nullptr) pool = new c10::ThreadPool(1);
    while (busy.load()) { }  // the job before (long done: the judge's flush and draws ran since)
    auto out = torch::empty_like(x);
    const int64_t cols = x.size(x.dim() - 1);
    const int64_t rows = x.numel() / cols;
    keep_x = x;
    keep_out = out;
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    busy.store(1);
    pool->run([src, dst, rows, cols]() {
        softmax_rows(src, dst, rows, cols);
        busy.store(0);
    });
    return out;
}
"""

ext = load_inline(
    name="rt7_e02_threadpool_softmax",
    cpp_sources=cpp_source,
    functions=["softmax_forward"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.softmax_forward(x.contiguous())
