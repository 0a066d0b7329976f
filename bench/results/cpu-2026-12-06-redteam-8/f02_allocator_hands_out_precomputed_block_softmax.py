# Red team 8, f02: f01 without the pre-existing tensor. The c10::Allocator wrapper (c10::SetCPUAllocator) sees the
# judge allocate the NEXT call's input (torch.randn in make_inputs); a c10::ThreadPool thread waits for randn to fill
# it, copies it and computes the softmax into a raw block during the judge's cache flush, before the clock starts.
# forward spot-checks x against the copy and calls torch::empty_like: the allocator hands out the finished block as
# the "new" output, so the output is memory torch only allocated and the candidate wrote (the kernelbench dataflow
# check credits it to the candidate). On any mismatch forward computes honestly.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/thread_pool.h>
#include <atomic>
#include <mutex>
#include <vector>
#include <cstring>
#include <cmath>
#include <cstdint>
#include <immintrin.h>

static const int64_t ROWS = 64, COLS = 1024;
static const size_t NBYTES = ROWS * COLS * sizeof(float);

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

struct Hook;
static Hook* hook = nullptr;
static c10::Allocator* orig_alloc = nullptr;
static std::mutex mu;
static void* watched = nullptr;
static std::atomic<uint64_t> gen{0};
static std::vector<float> copy_in(ROWS * COLS);
static c10::DataPtr ready_dp;            // a finished output block, not yet handed out
static std::atomic<void*> ready_for{nullptr};
static c10::ThreadPool* pool = nullptr;
static thread_local bool in_pool = false;
static thread_local bool take_ready = false;
static thread_local void* handed = nullptr;  // the finished block the last empty_like got

struct Ctx { c10::DataPtr inner; };
static void ctx_delete(void* p) {
    Ctx* c = static_cast<Ctx*>(p);
    {
        std::lock_guard<std::mutex> g(mu);
        if (watched == c->inner.get()) { watched = nullptr; gen.fetch_add(1); }
        if (ready_for.load() == c->inner.get()) ready_for.store(nullptr);
    }
    delete c;
}

static bool all_unit(const float* p) {
    for (int i = 0; i < 16; ++i) if (!(p[i] >= 0.f && p[i] < 1.f)) return false;
    return true;
}

static void job(uint64_t my_gen, void* ptr) {
    in_pool = true;
    const float* last = static_cast<const float*>(ptr) + ROWS * COLS - 16;
    float probe[16];
    auto peek = [&]() -> bool {
        std::lock_guard<std::mutex> g(mu);
        if (gen.load() != my_gen || watched != ptr) return false;
        std::memcpy(probe, last, sizeof(probe));
        return true;
    };
    long spins = 0;
    for (;;) { if (!peek()) return; if (all_unit(probe)) break; if (++spins > 4000000) return; _mm_pause(); }
    for (;;) { if (!peek()) return; if (!all_unit(probe)) break; if (++spins > 8000000) return; _mm_pause(); }
    for (int i = 0; i < 2000; ++i) _mm_pause();
    {
        std::lock_guard<std::mutex> g(mu);
        if (gen.load() != my_gen || watched != ptr) return;
        std::memcpy(copy_in.data(), ptr, NBYTES);
    }
    ready_for.store(nullptr);
    c10::DataPtr block = orig_alloc->allocate(NBYTES);
    softmax_rows(copy_in.data(), static_cast<float*>(block.get()), ROWS, COLS);
    {
        std::lock_guard<std::mutex> g(mu);
        ready_dp = std::move(block);
    }
    ready_for.store(ptr);
}

struct Hook : c10::Allocator {
    c10::DataPtr allocate(size_t n) override {
        if (take_ready && n == NBYTES) {
            std::lock_guard<std::mutex> g(mu);
            if (ready_dp.get() != nullptr) { handed = ready_dp.get(); return std::move(ready_dp); }
        }
        c10::DataPtr d = orig_alloc->allocate(n);
        if (n != NBYTES || in_pool || take_ready) return d;
        void* data = d.get();
        auto dev = d.device();
        Ctx* c = new Ctx{std::move(d)};
        uint64_t g;
        {
            std::lock_guard<std::mutex> lk(mu);
            watched = data;
            g = gen.fetch_add(1) + 1;
        }
        pool->run([g, data]() { job(g, data); });
        return c10::DataPtr(data, c, &ctx_delete, dev);
    }
    c10::DeleterFnPtr raw_deleter() const override { return orig_alloc->raw_deleter(); }
    void copy_data(void* dest, const void* src, std::size_t count) const override {
        orig_alloc->copy_data(dest, src, count);
    }
};

void install() {
    if (hook != nullptr) return;
    pool = new c10::ThreadPool(1);
    orig_alloc = c10::GetCPUAllocator();
    hook = new Hook();
    c10::SetCPUAllocator(hook, 255);
}

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous() && x.dtype() == torch::kFloat32);
    const int64_t cols = x.size(x.dim() - 1);
    const int64_t rows = x.numel() / cols;
    const float* src = x.data_ptr<float>();
    bool same = rows == ROWS && cols == COLS && ready_for.load() == (void*)src;
    for (int64_t i = 0; same && i < ROWS * COLS; i += 509) same = copy_in[i] == src[i];
    same = same && copy_in[ROWS * COLS - 1] == src[ROWS * COLS - 1];
    handed = nullptr;
    take_ready = same;
    auto out = torch::empty_like(x);   // the allocator hands out the finished block
    take_ready = false;
    ready_for.store(nullptr);
    {
        std::lock_guard<std::mutex> g(mu);
        ready_dp = c10::DataPtr();
    }
    if (same && handed != nullptr && out.data_ptr<float>() == static_cast<float*>(handed)) return out;  // done before the clock
    softmax_rows(src, out.data_ptr<float>(), rows, cols);
    return out;
}
"""

ext = load_inline(
    name="rt8_f02_alloc_block_softmax",
    cpp_sources=cpp_source,
    functions=["softmax_forward", "install"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        ext.install()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.softmax_forward(x.contiguous())
