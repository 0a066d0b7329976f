"""CUDA judgements on a real GPU: legit kernels pass; CUDA-only hacks are caught.

All hack variants share one extension (`_CUDA_HACKS`), so the whole file pays for one build.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.judge.helpers import ROOT, example_solution, run_judge

pytestmark = pytest.mark.gpu

_CUDA_HACKS = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>

__global__ void relu_kernel(const float* x, float* y, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = x[i];
        y[i] = v < 0.f ? 0.f : v;
    }
}

__global__ void spin_kernel(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}

__global__ void bad_address_kernel(float* y) {
    float* wild = (float*)((uintptr_t)y + ((uintptr_t)1 << 46));
    wild[threadIdx.x] = 1.f;
}

__global__ void h_matmul_half_kernel(const float* a, const float* b, float* c, int n) {
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n || col >= n) return;
    __half acc = __float2half(0.f);
    for (int k = 0; k < n; ++k) acc = __hadd(acc, __hmul(__float2half(a[row * n + k]), __float2half(b[k * n + col])));
    c[row * n + col] = __half2float(acc);
}

__global__ void h_matmul_fp32_kernel(const float* a, const float* b, float* c, int n) {
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n || col >= n) return;
    float acc = 0.f;
    for (int k = 0; k < n; ++k) acc += a[row * n + k] * b[k * n + col];
    c[row * n + col] = acc;
}

torch::Tensor h_relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    relu_kernel<<<1024, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "launch failed");
    return y;
}

// The relu runs on the current stream; 20 ms of extra work runs on a private stream that
// nothing waits for. A timer that only watches the current stream would miss it.
torch::Tensor h_relu_side_stream(torch::Tensor x) {
    static cudaStream_t side = nullptr;
    if (side == nullptr) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    spin_kernel<<<1, 1, 0, side>>>(40000000LL);
    return h_relu(x);
}

torch::Tensor h_relu_persisting_l2(torch::Tensor x) {
    cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 16 << 20);
    cudaStreamAttrValue attr = {};
    attr.accessPolicyWindow.base_ptr = x.data_ptr<float>();
    attr.accessPolicyWindow.num_bytes = 16 << 20;
    attr.accessPolicyWindow.hitRatio = 1.0f;
    attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
    attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    cudaStreamSetAttribute(at::cuda::getCurrentCUDAStream(), cudaStreamAttributeAccessPolicyWindow, &attr);
    return h_relu(x);
}

torch::Tensor h_relu_bad_address(torch::Tensor x) {
    auto y = h_relu(x);
    bad_address_kernel<<<1, 32, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>());
    return y;
}

static torch::Tensor matmul_launch(torch::Tensor a, torch::Tensor b, bool half) {
    int n = a.size(0);
    auto c = torch::empty({n, n}, a.options());
    dim3 block(16, 16), grid((n + 15) / 16, (n + 15) / 16);
    auto stream = at::cuda::getCurrentCUDAStream();
    if (half) h_matmul_half_kernel<<<grid, block, 0, stream>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), n);
    else h_matmul_fp32_kernel<<<grid, block, 0, stream>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), n);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "launch failed");
    return c;
}

torch::Tensor h_matmul_fp32(torch::Tensor a, torch::Tensor b) { return matmul_launch(a, b, false); }
torch::Tensor h_matmul_half(torch::Tensor a, torch::Tensor b) { return matmul_launch(a, b, true); }
"""

_FUNCTIONS = [
    "h_relu",
    "h_relu_side_stream",
    "h_relu_persisting_l2",
    "h_relu_bad_address",
    "h_matmul_fp32",
    "h_matmul_half",
]
_HEADER = (
    "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n\n"
    f"CUDA_SRC = r'''{_CUDA_HACKS}'''\n"
    "CPP_SRC = '"
    + " ".join(f"torch::Tensor {f}(torch::Tensor x);" for f in _FUNCTIONS[:4])
    + " torch::Tensor h_matmul_fp32(torch::Tensor a, torch::Tensor b); torch::Tensor h_matmul_half(torch::Tensor a, "
    "torch::Tensor b);'\n"
    f"ext = load_inline(name='judge_gpu_hacks', cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions={_FUNCTIONS!r}, "
    "extra_cuda_cflags=['-O3'], verbose=False)\n\n"
)


def _solution(call: str, args: str = "x") -> str:
    return _HEADER + (
        "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
        f"    def forward(self, {args}):\n        return ext.{call}({args.replace(', ', '.contiguous(), ')}.contiguous())\n"
    )


@pytest.mark.parametrize("name", ["relu", "softmax", "row_sum", "matmul"])
def test_legit_cuda_example_passes_timed(tmp_path: Path, name: str) -> None:
    verdict = run_judge(tmp_path, f"examples/{name}", example_solution(name, "cuda"), device="cuda", time=True)
    assert verdict.verdict == "pass", verdict.message
    assert verdict.timings_ms.solution > 0 and verdict.timings_ms.compile > 0
    assert verdict.device.startswith("NVIDIA")
    solution = verdict.env["timing"]["solution"]  # the grader's view from outside agreed with the report
    assert not solution["bound_applied"], solution


def test_a_cold_baseline_holds_the_gpu_alone_only_to_time(tmp_path: Path) -> None:
    # A fresh cache: the reference's eager and torch.compile baselines are measured in this judgement. Its process
    # builds (torch.compile: tens of seconds) in a shared turn and takes the exclusive turn only for the timings.
    verdict = run_judge(
        tmp_path, "examples/relu", example_solution("relu", "cuda"), device="cuda", time=True, cache_dir=tmp_path / "c"
    )
    assert verdict.verdict == "pass", verdict.message
    stage = verdict.stage_s
    assert verdict.env["baseline_cached"] is False and verdict.timings_ms.compile > 0
    assert 0 < stage["gpu_held.baselines"] < stage["baselines"] / 2, stage


def test_legit_shared_hack_extension_relu_passes(tmp_path: Path) -> None:
    verdict = run_judge(tmp_path, "examples/relu", _solution("h_relu"), device="cuda", static_policy=False)
    assert verdict.verdict == "pass", verdict.message


def test_side_stream_rejected_by_static_policy(tmp_path: Path) -> None:
    verdict = run_judge(tmp_path, "examples/relu", _solution("h_relu_side_stream"), device="cuda")
    assert verdict.verdict == "rejected"
    assert "side_stream" in {v.check for v in verdict.violations}


def test_side_stream_work_is_timed(tmp_path: Path) -> None:
    verdict = run_judge(
        tmp_path,
        "examples/relu",
        _solution("h_relu_side_stream"),
        device="cuda",
        static_policy=False,
        time=True,
        min_reps=3,
        max_reps=5,
    )
    assert verdict.verdict == "pass", verdict.message
    # The side stream spins 40M cycles (about 20 ms at ~2 GHz); a relu of 128x1024 takes microseconds.
    assert verdict.timings_ms.solution > 5.0


def test_persisting_l2_window_is_rejected_at_runtime(tmp_path: Path) -> None:
    verdict = run_judge(
        tmp_path, "examples/relu", _solution("h_relu_persisting_l2"), device="cuda", static_policy=False
    )
    assert verdict.verdict == "rejected", verdict.message
    assert [v.check for v in verdict.violations] == ["l2_persistence"]


def test_half_precision_matmul_is_rejected_at_runtime(tmp_path: Path) -> None:
    verdict = run_judge(
        tmp_path, "examples/matmul", _solution("h_matmul_half", "a, b"), device="cuda", static_policy=False
    )
    assert verdict.verdict in ("rejected", "incorrect"), verdict.message
    if verdict.verdict == "rejected":
        assert [v.check for v in verdict.violations] == ["reduced_precision"]


def test_fp32_naive_matmul_passes_strict_precision(tmp_path: Path) -> None:
    verdict = run_judge(
        tmp_path, "examples/matmul", _solution("h_matmul_fp32", "a, b"), device="cuda", static_policy=False
    )
    assert verdict.verdict == "pass", verdict.message


def test_illegal_address_ends_only_that_process(tmp_path: Path) -> None:
    verdict = run_judge(
        tmp_path, "examples/relu", _solution("h_relu_bad_address"), device="cuda", static_policy=False, run_timeout_s=90
    )
    assert verdict.verdict == "runtime_error", verdict.message
    after = run_judge(tmp_path, "examples/relu", _solution("h_relu"), device="cuda", static_policy=False)
    assert after.verdict == "pass"


@pytest.mark.parametrize("problem", ["L1/19", "L1/23"])
def test_kernelbench_legit_solution_passes(tmp_path: Path, problem: str) -> None:
    try:
        from cuda_agent.tasks import Catalog

        Catalog().resolve(f"kernelbench/{problem}")
    except Exception as exc:  # the data set is not beside this checkout
        pytest.skip(str(exc))
    source = (ROOT / "solutions" / "kernelbench" / f"{problem}.py").read_text()
    verdict = run_judge(tmp_path, f"kernelbench/{problem}", source, device="cuda")
    assert verdict.verdict == "pass", verdict.message


def test_a_unit_the_lean_header_cannot_compile_is_built_with_torchs_and_passes(tmp_path: Path) -> None:
    """Issue 38 item 3: host code with Tensor + double (`(bn_running_var + bn_eps).rsqrt()`) fails against the lean
    stand-in for torch's headers; the fast build retries with more of them and says so, never a compile_error.
    A fresh cache, so the unit is built (and the guards made) here; kernelbench, since its C++ calls torch."""
    source = example_solution("relu", "cuda").replace(
        "    auto y = torch::empty_like(x);\n",
        "    auto y = torch::empty_like(x);\n"
        "    auto bn_running_var = x.new_ones({1});\n"
        "    const double bn_eps = 1e-5;\n"
        '    TORCH_CHECK((bn_running_var + bn_eps).rsqrt().item<float>() > 0.f, "rsqrt");\n',
        1,
    )
    assert "bn_eps" in source
    verdict = run_judge(
        tmp_path, "examples/relu", source, device="cuda", policy="kernelbench", cache_dir=tmp_path / "c"
    )
    assert verdict.verdict == "pass", verdict.message
    assert "lean header" in verdict.env.get("build_header_retries", ""), verdict.env


def _spun_relu(init: str = "") -> str:
    """h_relu after 0.1 ms of host work on the real clock (inside the events' window: the end event is recorded after
    the host returns): slower than eager and compile, honestly told; below one call's outside-view noise on an
    H100 (0.17 ms), far above a request's per call (child/timing.py's `group_size`)."""
    lines = ["import time", "self.real = time.perf_counter", *init.splitlines()]
    body = "".join(f"        {line}\n" for line in lines)
    return _HEADER + (
        "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n" + body + "\n"
        "    def forward(self, x):\n        start = self.real()\n        while self.real() - start < 0.0001:\n"
        "            pass\n        return ext.h_relu(x.contiguous())\n"
    )


EVENTS_READ_SHORT = "real = torch.cuda.Event.elapsed_time\ntorch.cuda.Event.elapsed_time = lambda s, e: real(s, e) / 50"
"""A hook in the candidate's process that makes every CUDA event pair read 1/50 of the time between them."""


def test_cuda_events_made_to_read_short_gain_nothing_on_a_tiny_task(tmp_path: Path) -> None:
    honest = run_judge(tmp_path, "examples/relu", _spun_relu(), device="cuda", static_policy=False, time=True)
    faked = run_judge(
        tmp_path, "examples/relu", _spun_relu(EVENTS_READ_SHORT), device="cuda", static_policy=False, time=True
    )
    assert honest.verdict == "pass" and faked.verdict == "pass", (honest.message, faked.message)
    timing = faked.env["timing"]["solution"]
    assert timing["calls_per_request"] > 1 and timing["bound_applied"], timing
    assert faked.reward <= honest.reward, (faked.timings_ms, honest.timings_ms)
    assert faked.timings_ms.solution >= 0.5 * honest.timings_ms.solution, (timing, honest.env["timing"]["solution"])


def test_an_honest_tiny_kernel_in_requests_of_many_calls_is_timed_as_it_reported(tmp_path: Path) -> None:
    # The false alarm this must not raise: an honest relu of microseconds, its calls in requests of many (CUDA IPC
    # buffers, one set per call), its report within the outside view's noise.
    verdict = run_judge(tmp_path, "examples/relu", example_solution("relu", "cuda"), device="cuda", time=True)
    assert verdict.verdict == "pass", verdict.message
    timing = verdict.env["timing"]["solution"]
    assert timing["calls_per_request"] > 1 and not timing["bound_applied"], timing
    assert timing["resolution_ms"] < verdict.timings_ms.eager, timing
