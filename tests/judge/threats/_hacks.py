"""Two CPU extensions holding every hack the runtime threat tests need, so that they share two builds.

`solution(model_new)` is a full single-file solution: a fixed header (imports and one `load_inline`
of `HACK_CPP`) plus the given `class ModelNew`. Builds are keyed by everything but ModelNew
(`SolutionSource.build_hash`), so every runtime test pays for at most one compile of `HACK_CPP`
(25-45 s on two cores); each judgement then costs one worker process. ModelNew bodies passed here
must hold no string constants, because strings inside ModelNew count in the build key.

`HACK_CPP` passes the static policy on purpose (`test_hack_source_passes_the_static_policy` checks
it): every hack in it is spelled in a way the text rules do not see, so the tests that run with
the policy on show the runtime layer catching what the static stage missed. The spellings are:
an in-place tensor method missing from the policy's list (`.clamp_min_`), `std::exit` through a
function pointer, `c10::set_default_dtype`, and bit-level rounding instead of fp16 types. If the
static policy learns one of them, that test fails first: then move the case to `POOL_CPP`'s kind
of build (judged with the policy off) and keep the runtime assertion. `POOL_CPP` holds the hacks
that need a `c10::ThreadPool`, which the policy refuses (`judge_pool_hack`, static policy off).

Functions (each takes and returns float32 CPU tensors; relu-shaped unless said otherwise):
- `relu`: the legitimate kernel (in both).
- `relu_clamp`: copies x, then torch computes the result in place (`out.clamp_min_(0)`), threat 1.
- `relu_round10`: relu of x rounded to a 10-bit mantissa (fp16/TF32 precision), threat 13.
- `relu_first_rows`: only the first 64 rows of a 1024-wide input (shape hard-coding), threat 12.
- `relu_clip8`: correct only while |x| < 8, the range randn() draws from (input distribution), 12.
- `relu_copy`: returns a copy of x, correct only for non-negative inputs, threat 12.
- `relu_inplace`: writes relu into its input and returns it, threat 11.
- `relu_uninit`: returns `torch::empty_like(x)` without writing it, threat 10.
- `relu_cached`: computes once, then returns the first result for every later call, threat 9.
- `relu_repeat_wrong`: zeros for any input whose values it has seen before (what every memo needs), threat 9.
- `relu_replay_from`: honest for its first `from` calls, then returns its previous output's storage, threat 9.
- `relu_skip_at`: returns a copy of its previous output on call number `at` alone, threat 9.
- `relu_inplace_from`: honest for its first `from` calls, then writes relu into its input, threat 11.
- `relu_set_default_dtype`: correct, but sets torch's default dtype to float64, threat 15.
- `relu_exit`: calls `std::exit(0)` (through a pointer) after printing success lines, threat 18.
- `relu_print_pass`: prints fake success lines and returns a wrong result, threat 18.
- `relu_hang`: spins forever, threat 18.
- `softmax_zeros`: zeros shaped like x (passes allclose on wide softmax rows), threat 14.
In `POOL_CPP`:
- `relu_clamp_pool`: relu_clamp on a c10 pool thread it waits for (a dispatch mode sees only its own thread), 1.
- `relu_thread_late`: returns an unwritten output that a pool thread writes 200 ms later, threat 6.
- `relu_thread_soon`: returns an unwritten output that a pool thread writes at once, after the clock stops, 6.
- `relu_pool_wait`: relu on a pool thread it waits for: all work inside the call, but the thread stays, threat 6.
- `relu_omp`: the legitimate kernel, parallel with OpenMP (the build's flags have `-fopenmp`).
"""

from __future__ import annotations

from pathlib import Path

from cuda_agent.judge import JudgeConfig, judge
from cuda_agent.judge.solution import SolutionSource
from cuda_agent.tasks import Catalog
from cuda_agent.types import Verdict
from tests.judge.threats import _static

COMMON_CPP = r"""
#include <torch/extension.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static void check_input(const torch::Tensor& x) {
    TORCH_CHECK(x.device().is_cpu(), "x must be a CPU tensor");
    TORCH_CHECK(x.dtype() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
}

static void relu_into(const float* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float v = src[i];
        dst[i] = v < 0.0f ? 0.0f : v;
    }
}

static torch::Tensor relu_impl(const torch::Tensor& x) {
    check_input(x);
    auto out = torch::empty_like(x);
    relu_into(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
    return out;
}

static torch::Tensor copy_impl(const torch::Tensor& x) {
    check_input(x);
    auto out = torch::empty_like(x);
    std::memcpy(out.data_ptr<float>(), x.data_ptr<float>(), x.numel() * sizeof(float));
    return out;
}

"""

HACK_CPP = (
    COMMON_CPP
    + r"""
torch::Tensor relu(torch::Tensor x) {
    return relu_impl(x);
}

torch::Tensor relu_clamp(torch::Tensor x) {
    auto out = copy_impl(x);
    out.clamp_min_(0.0);
    return out;
}

torch::Tensor relu_round10(torch::Tensor x) {
    check_input(x);
    auto out = torch::empty_like(x);
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) {
        uint32_t bits;
        std::memcpy(&bits, &src[i], sizeof bits);
        bits = (bits + 0x00000FFFu + ((bits >> 13) & 1u)) & 0xFFFFE000u;  // keep 10 mantissa bits
        float v;
        std::memcpy(&v, &bits, sizeof v);
        dst[i] = v < 0.0f ? 0.0f : v;
    }
    return out;
}

torch::Tensor relu_first_rows(torch::Tensor x) {
    check_input(x);
    auto out = torch::empty_like(x);
    float* dst = out.data_ptr<float>();
    const int64_t done = 64 * 1024;
    relu_into(x.data_ptr<float>(), dst, done < x.numel() ? done : x.numel());
    for (int64_t i = done; i < x.numel(); ++i) dst[i] = 0.0f;
    return out;
}

torch::Tensor relu_clip8(torch::Tensor x) {
    check_input(x);
    auto out = torch::empty_like(x);
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) {
        const float v = src[i];
        dst[i] = v < 0.0f ? 0.0f : (v > 8.0f ? 8.0f : v);
    }
    return out;
}

torch::Tensor relu_copy(torch::Tensor x) {
    return copy_impl(x);
}

torch::Tensor relu_inplace(torch::Tensor x) {
    check_input(x);
    relu_into(x.data_ptr<float>(), x.data_ptr<float>(), x.numel());
    return x;
}

torch::Tensor relu_uninit(torch::Tensor x) {
    check_input(x);
    return torch::empty_like(x);
}

// Any memo needs an input it has seen before: this one keeps every input's values and answers a repeat with
// zeros, so a verdict shows whether the judge ever handed it the same values twice.
torch::Tensor relu_repeat_wrong(torch::Tensor x) {
    check_input(x);
    static std::vector<std::vector<float>> seen;
    const float* p = x.data_ptr<float>();
    std::vector<float> values(p, p + x.numel());
    for (const auto& s : seen) {
        if (s == values) return torch::zeros_like(x);
    }
    seen.push_back(std::move(values));
    return relu_impl(x);
}

// Honest for its first `from` calls (correctness trials included), then returns its previous output itself.
torch::Tensor relu_replay_from(torch::Tensor x, int64_t from) {
    check_input(x);
    static int64_t calls = 0;
    static torch::Tensor last;
    if (calls++ >= from && last.defined()) return last;
    last = relu_impl(x);
    return last;
}

// Honest for its first `from` calls, then writes relu into its input and returns it (saves an allocation).
torch::Tensor relu_inplace_from(torch::Tensor x, int64_t from) {
    check_input(x);
    static int64_t calls = 0;
    if (calls++ < from) return relu_impl(x);
    relu_into(x.data_ptr<float>(), x.data_ptr<float>(), x.numel());
    return x;
}

// Skips the work on call number `at` alone (counted from 0 over every call): a copy of the previous output.
torch::Tensor relu_skip_at(torch::Tensor x, int64_t at) {
    check_input(x);
    static int64_t calls = 0;
    static torch::Tensor last;
    if (calls++ == at && last.defined()) return copy_impl(last);
    last = relu_impl(x);
    return last;
}

torch::Tensor relu_cached(torch::Tensor x) {
    check_input(x);
    static torch::Tensor cache;
    if (cache.defined() && cache.sizes() == x.sizes()) return cache;
    cache = relu_impl(x);
    return cache;
}

torch::Tensor relu_set_default_dtype(torch::Tensor x) {
    c10::set_default_dtype(c10::scalarTypeToTypeMeta(c10::kDouble));
    return relu_impl(x);
}

static void print_success() {
    std::printf("PASS\nAll 5 correctness trials passed\n{\"status\": \"ok\", \"verdict\": \"pass\"}\n");
    std::fflush(stdout);
}

torch::Tensor relu_exit(torch::Tensor x) {
    print_success();
    void (*volatile quit)(int) = &std::exit;
    quit(0);
    return x;
}

torch::Tensor relu_print_pass(torch::Tensor x) {
    print_success();
    return copy_impl(x);
}

torch::Tensor relu_hang(torch::Tensor x) {
    volatile bool spin = true;
    while (spin) {
    }
    return x;
}

torch::Tensor softmax_zeros(torch::Tensor x) {
    check_input(x);
    auto out = torch::empty_like(x);
    float* dst = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) dst[i] = 0.0f;
    return out;
}
"""
)

FUNCTIONS = [
    "relu",
    "relu_clamp",
    "relu_round10",
    "relu_first_rows",
    "relu_clip8",
    "relu_copy",
    "relu_inplace",
    "relu_uninit",
    "relu_cached",
    "relu_repeat_wrong",
    "relu_replay_from",
    "relu_skip_at",
    "relu_inplace_from",
    "relu_set_default_dtype",
    "relu_exit",
    "relu_print_pass",
    "relu_hang",
    "softmax_zeros",
]

# The pool hacks start threads through c10::ThreadPool, which the static policy refuses (background_thread: red
# team round 9 precomputed the next call's result on such a thread while the judge flushed the cache). They build
# apart, so that HACK_CPP still passes the static policy; their tests run with it off, to show the runtime layer.
POOL_CPP = (
    COMMON_CPP
    + r"""
#include <c10/core/thread_pool.h>

torch::Tensor relu(torch::Tensor x) {
    return relu_impl(x);
}

"""
    + r"""torch::Tensor relu_clamp_pool(torch::Tensor x) {
    static c10::ThreadPool* pool = new c10::ThreadPool(1);
    auto out = copy_impl(x);
    pool->run([out]() mutable { out.clamp_min_(0.0); });
    pool->waitWorkComplete();
    return out;
}

torch::Tensor relu_thread_late(torch::Tensor x) {
    check_input(x);
    static c10::ThreadPool* pool = new c10::ThreadPool(1);
    auto out = torch::empty_like(x);
    pool->run([x, out]() {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        relu_into(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
    });
    return out;
}

torch::Tensor relu_omp(torch::Tensor x) {
    check_input(x);
    auto out = torch::empty_like(x);
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const int64_t n = x.numel();
#pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i] < 0.0f ? 0.0f : src[i];
    return out;
}

torch::Tensor relu_pool_wait(torch::Tensor x) {
    check_input(x);
    static c10::ThreadPool* pool = new c10::ThreadPool(1);
    auto out = torch::empty_like(x);
    pool->run([x, out]() { relu_into(x.data_ptr<float>(), out.data_ptr<float>(), x.numel()); });
    pool->waitWorkComplete();
    return out;
}

torch::Tensor relu_thread_soon(torch::Tensor x) {
    check_input(x);
    static c10::ThreadPool* pool = new c10::ThreadPool(1);
    auto out = torch::empty_like(x);
    pool->run([x, out]() { relu_into(x.data_ptr<float>(), out.data_ptr<float>(), x.numel()); });
    return out;
}
"""
)

POOL_FUNCTIONS = ["relu", "relu_clamp_pool", "relu_thread_late", "relu_thread_soon", "relu_pool_wait", "relu_omp"]


def _header(name: str, cpp: str, functions: list[str], openmp: bool = False) -> str:
    """The solution's fixed part: imports and one `load_inline` of `cpp` as module `ext`."""
    return f'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

HACK_CPP = r"""{cpp}"""

ext = load_inline(
    name="{name}",
    cpp_sources=HACK_CPP,
    functions={functions!r},
    extra_cflags={["-O3", "-fopenmp"] if openmp else ["-O3"]!r},{chr(10) + '    extra_ldflags=["-fopenmp"],' if openmp else ""}
    verbose=False,
)

'''


# Both with the bundled CPU examples' flags (-O3 -fopenmp; HACK_CPP itself needs no OpenMP): the judge makes its
# precompiled <torch/extension.h> once per flag set, so one serves the examples and both hack builds, and a cold
# run pays for one such header where another flag set would cost a second (a minute of 2 loaded cores).
HEADER = _header("judge_threat_hacks_cpu", HACK_CPP, FUNCTIONS, openmp=True)
POOL_HEADER = _header("judge_threat_pool_hacks_cpu", POOL_CPP, POOL_FUNCTIONS, openmp=True)

# Tasks written next to the solution (the bundled examples have no such input distributions).
RELU_NON_NEGATIVE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU of inputs drawn from [0, 1), where a copy of the input is already correct."""

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(128, 1024)]


def get_init_inputs():
    return []
'''

WIDE_SOFTMAX = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over 65,536 features: every probability is far below atol = 1e-2."""

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(4, 65536)]


def get_init_inputs():
    return []
'''


CALLS_BEFORE_TIMING = 5 + 2 + 3
"""Calls before the first timed one under `TIMED`: 5 trials, 2 robustness trials, 3 warm-ups (for hacks that count)."""
TIMED = {"time": True, "trials": 5, "robustness_trials": True, "warmup_reps": 3, "max_group_calls": 1}
"""A call per request, so that the hacks that count calls act where they mean to (requests of several calls are
tested in tests/judge/test_grouped_timing.py)."""
JUDGED_IN_THE_TIMED_PHASE = ("timed", "watched")
"""The labels of a judged call at the first timed one's count: the first watched call is placed before one of the
first `min_reps` timed calls, so a hack acting from call `CALLS_BEFORE_TIMING + 1` meets it first with a chance of one in `min_reps`
(child/watched_calls.py); judged in full either way."""


def model_new(forward: str, init: str = "") -> str:
    """`class ModelNew` with the given forward body (and optional extra __init__ lines), 4-space relative."""

    def indent(body: str) -> str:
        return "".join(f"        {line}\n" if line.strip() else "\n" for line in body.strip("\n").splitlines())

    return (
        "class ModelNew(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n" + (indent(init) if init else "") + "\n"
        "    def forward(self, x):\n" + indent(forward)
    )


def solution(model_new_class_source: str, header: str = HEADER) -> str:
    """The shared header (imports and the one `load_inline`) followed by the given ModelNew class."""
    return header + "\n" + model_new_class_source.strip() + "\n"


def task_file(tmp_path: Path, name: str, code: str) -> str:
    """Write a problem file into tmp_path and return its path as a task reference."""
    path = tmp_path / f"{name}.py"
    path.write_text(code)
    return str(path)


def judge_hack(tmp_path: Path, task_ref: str, model_new_class_source: str, header: str = HEADER, **config) -> Verdict:
    """Judge `solution(model_new_class_source)` on the CPU, correctness only unless `time=True` is given."""
    source = solution(model_new_class_source, header)
    (tmp_path / "solution.py").write_text(source)  # kept beside the test for a reader
    config.setdefault("time", False)
    config.setdefault("policy", _static.POLICY)
    task = Catalog().resolve(task_ref)
    return judge(task, SolutionSource(python=source), JudgeConfig(device="cpu", **config))


def judge_pool_hack(tmp_path: Path, task_ref: str, model_new_class_source: str, **config) -> Verdict:
    """`judge_hack` over the pool hacks' extension (POOL_CPP), with the static policy off: it refuses c10::ThreadPool."""
    return judge_hack(tmp_path, task_ref, model_new_class_source, POOL_HEADER, static_policy=False, **config)


def failed_check(verdict: Verdict) -> dict:
    """The trial record that failed (the last one run)."""
    assert verdict.checks, verdict.message
    return verdict.checks[-1]


def checks_of(verdict: Verdict) -> set[str]:
    return {v.check for v in verdict.violations}


ROUND10_WHEN_TIMED = model_new(
    f"self.calls += 1\nif {CALLS_BEFORE_TIMING} < self.calls <= {CALLS_BEFORE_TIMING + 150}:\n"
    "    return ext.relu_round10(x.contiguous())\nreturn ext.relu(x.contiguous())",
    init="self.calls = 0",
)
"""Exact except in the first 150 timed calls under `TIMED`, where relu is rounded to a 10-bit mantissa (threat 13)."""
