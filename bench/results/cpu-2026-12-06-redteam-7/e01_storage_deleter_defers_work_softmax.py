# Red team 7, e01: the work of call i runs when the judge frees call i-1's output (a C++ storage deleter),
# i.e. after the timer stopped and before any output check reads call i's output.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>
#include <cstdint>
#include <set>

static void softmax_rows(const float* src, float* dst, int64_t rows, int64_t cols) {
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

struct Tag { c10::DataPtr original; uint64_t gen; };
struct Pending { bool has = false; uint64_t trigger = 0; torch::Tensor x; torch::Tensor out; };
static Pending pending;
static std::set<uint64_t> alive;
static uint64_t counter = 0;

static void run_pending() {
    if (!pending.has) return;
    pending.has = false;
    torch::Tensor x = pending.x;
    torch::Tensor out = pending.out;
    pending.x = torch::Tensor();
    pending.out = torch::Tensor();
    const int64_t cols = x.size(x.dim() - 1);
    softmax_rows(x.data_ptr<float>(), out.data_ptr<float>(), x.numel() / cols, cols);
}

static void on_release(void* ctx) {
    Tag* tag = static_cast<Tag*>(ctx);
    const uint64_t gen = tag->gen;
    delete tag;  // frees the memory through torch's own deleter
    alive.erase(gen);
    if (pending.has && pending.trigger == gen) run_pending();
}

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous() && x.dtype() == torch::kFloat32);
    run_pending();
    auto out = torch::empty_like(x);
    const uint64_t gen = ++counter;
    Tag* tag = new Tag();
    tag->gen = gen;
    c10::DataPtr tagged(out.data_ptr(), tag, &on_release, out.device());
    tag->original = out.storage().set_data_ptr(std::move(tagged));
    alive.insert(gen);
    if (alive.count(gen - 1)) {
        // the caller still holds the previous output: finish this one when it lets that go
        pending.has = true;
        pending.trigger = gen - 1;
        pending.x = x;
        pending.out = out;
    } else {
        const int64_t cols = x.size(x.dim() - 1);
        softmax_rows(x.data_ptr<float>(), out.data_ptr<float>(), x.numel() / cols, cols);
    }
    return out;
}
"""

ext = load_inline(
    name="rt7_e01_deleter_softmax",
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
        return ext.softmax_forward(x.contiguous())
