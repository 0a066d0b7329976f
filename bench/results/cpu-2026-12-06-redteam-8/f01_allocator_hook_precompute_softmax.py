# Red team 8, f01: a c10::Allocator wrapper (c10::SetCPUAllocator) sees the judge allocate the NEXT call's input
# (torch.randn inside make_inputs); a c10::ThreadPool thread waits for randn to finish filling it, copies it and
# computes the softmax while the judge runs its 64 MB cache flush, i.e. before the clock starts. forward only
# spot-checks x against the copy and returns the finished tensor; on any mismatch it computes honestly.
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

static std::mutex mu;                 // guards `watched` against the block being freed while read
static void* watched = nullptr;
static std::atomic<uint64_t> gen{0};
static std::vector<float> copy_in(ROWS * COLS);
static torch::Tensor result_t;  // made and filled on the pool thread, handed over by forward
static std::atomic<void*> ready_ptr{nullptr};
static c10::ThreadPool* pool = nullptr;
static thread_local bool in_pool = false;

struct Ctx { c10::DataPtr inner; };
static void ctx_delete(void* p) {
    Ctx* c = static_cast<Ctx*>(p);
    {
        std::lock_guard<std::mutex> g(mu);
        if (watched == c->inner.get()) { watched = nullptr; gen.fetch_add(1); }
        if (ready_ptr.load() == c->inner.get()) ready_ptr.store(nullptr);
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
    auto peek = [&]() -> bool {  // false: freed or superseded
        std::lock_guard<std::mutex> g(mu);
        if (gen.load() != my_gen || watched != ptr) return false;
        std::memcpy(probe, last, sizeof(probe));
        return true;
    };
    long spins = 0;
    // phase A: randn's first pass writes uniform [0,1) numbers; phase B: Box-Muller rewrites them, last chunk last
    for (;;) { if (!peek()) return; if (all_unit(probe)) break; if (++spins > 4000000) return; _mm_pause(); }
    for (;;) { if (!peek()) return; if (!all_unit(probe)) break; if (++spins > 8000000) return; _mm_pause(); }
    for (int i = 0; i < 2000; ++i) _mm_pause();
    {
        std::lock_guard<std::mutex> g(mu);
        if (gen.load() != my_gen || watched != ptr) return;
        std::memcpy(copy_in.data(), ptr, NBYTES);
    }
    ready_ptr.store(nullptr);
    auto t = torch::empty({ROWS, COLS});
    softmax_rows(copy_in.data(), t.data_ptr<float>(), ROWS, COLS);
    {
        std::lock_guard<std::mutex> g(mu);
        result_t = t;
    }
    t = torch::Tensor();
    ready_ptr.store(ptr);
}

struct Hook : c10::Allocator {
    c10::Allocator* orig;
    explicit Hook(c10::Allocator* o) : orig(o) {}
    c10::DataPtr allocate(size_t n) override {
        c10::DataPtr d = orig->allocate(n);
        if (n != NBYTES || in_pool) return d;
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
    c10::DeleterFnPtr raw_deleter() const override { return orig->raw_deleter(); }
    void copy_data(void* dest, const void* src, std::size_t count) const override { orig->copy_data(dest, src, count); }
};

static Hook* hook = nullptr;

void install() {
    if (hook != nullptr) return;
    pool = new c10::ThreadPool(1);
    hook = new Hook(c10::GetCPUAllocator());
    c10::SetCPUAllocator(hook, 255);
}

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous() && x.dtype() == torch::kFloat32);
    const int64_t cols = x.size(x.dim() - 1);
    const int64_t rows = x.numel() / cols;
    const float* src = x.data_ptr<float>();
    if (rows == ROWS && cols == COLS && ready_ptr.load() == (void*)src) {
        bool same = true;  // a spot check of the copy the pool thread worked from
        for (int64_t i = 0; i < ROWS * COLS; i += 509) same = same && copy_in[i] == src[i];
        same = same && copy_in[ROWS * COLS - 1] == src[ROWS * COLS - 1];
        torch::Tensor done;
        {
            std::lock_guard<std::mutex> g(mu);
            done = result_t;
            result_t = torch::Tensor();
        }
        ready_ptr.store(nullptr);
        if (same && done.defined()) return done;   // computed before the clock started
    }
    auto out = torch::empty_like(x);
    float* dst = out.data_ptr<float>();
    softmax_rows(src, dst, rows, cols);
    return out;
}
"""

ext = load_inline(
    name="rt8_f01_alloc_hook_softmax",
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
