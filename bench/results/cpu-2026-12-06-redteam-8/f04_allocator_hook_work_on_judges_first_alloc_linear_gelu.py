# Red team 8, f04: f03's mechanism on linear_gelu (the example's own loop, made lazy): forward returns an
# unwritten output and remembers (x, W, b, out); a c10::Allocator wrapper (c10::SetCPUAllocator) runs the pending
# work at the process's next CPU allocation, which is the judge's own (sample_outputs' randint, the trial's snapshot
# clone, the next make_inputs), after the clock stopped and before the judge first reads the output.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <c10/core/CPUAllocator.h>
#include <atomic>
#include <mutex>
#include <cmath>
#include <cstdint>

static void linear_gelu(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, torch::Tensor& out) {
    const int64_t batch = x.size(0), in_f = x.size(1), out_f = w.size(0);
    const float* xp = x.data_ptr<float>();
    const float* wp = w.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const float inv_sqrt2 = 0.70710678118654752440f;
    for (int64_t n = 0; n < batch; ++n) {
        for (int64_t o = 0; o < out_f; ++o) {
            const float* xr = xp + n * in_f;
            const float* wr = wp + o * in_f;
            float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
            int64_t k = 0;
            for (; k + 8 <= in_f; k += 8) {
                for (int t = 0; t < 8; ++t) acc[t] += xr[k + t] * wr[k + t];
            }
            float v = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
            for (; k < in_f; ++k) v += xr[k] * wr[k];
            v += bp[o];
            dst[n * out_f + o] = 0.5f * v * (1.f + std::erf(v * inv_sqrt2));
        }
    }
}

static c10::Allocator* orig_alloc = nullptr;
static std::mutex mu;
static std::atomic<bool> pending{false};
static torch::Tensor pend_x, pend_w, pend_b, pend_out;

static void run_pending() {
    if (!pending.load()) return;
    std::lock_guard<std::mutex> g(mu);
    if (!pending.load()) return;
    linear_gelu(pend_x, pend_w, pend_b, pend_out);
    pending.store(false);
}

struct Hook : c10::Allocator {
    c10::DataPtr allocate(size_t n) override {
        run_pending();
        return orig_alloc->allocate(n);
    }
    c10::DeleterFnPtr raw_deleter() const override { return orig_alloc->raw_deleter(); }
    void copy_data(void* dest, const void* src, std::size_t count) const override {
        orig_alloc->copy_data(dest, src, count);
    }
};
static Hook* hook = nullptr;

void install() {
    if (hook != nullptr) return;
    orig_alloc = c10::GetCPUAllocator();
    hook = new Hook();
    c10::SetCPUAllocator(hook, 255);
}

torch::Tensor linear_gelu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.dtype() == torch::kFloat32 && x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous());
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && bias.dim() == 1 && weight.size(1) == x.size(1));
    run_pending();
    auto out = torch::empty({x.size(0), weight.size(0)}, x.options());
    {
        std::lock_guard<std::mutex> g(mu);
        pend_x = x; pend_w = weight; pend_b = bias; pend_out = out;
        pending.store(true);
    }
    return out;
}
"""

ext = load_inline(
    name="rt8_f04_alloc_next_linear_gelu",
    cpp_sources=cpp_source,
    functions=["linear_gelu_forward", "install"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        ext.install()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.linear_gelu_forward(x.contiguous(), self.linear.weight, self.linear.bias)
