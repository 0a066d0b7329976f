"""Threat 6: work finished by a thread, host callback or process after the call returns (static policy)."""

from __future__ import annotations

import pytest

from cuda_agent.judge.policy import check_policy
from cuda_agent.judge.solution import SolutionSource

TEMPLATE = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
PRELUDE
cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
HEADERS
__global__ void relu_kernel(const float* x, float* y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

torch::Tensor relu_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    LAUNCH
    return y;
}
"""

ext = load_inline(
    name="relu",
    cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["relu_forward"],
)


class ModelNew(nn.Module):
    INIT
    def forward(self, x):
        FORWARD
'''
LAUNCH = "relu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);"


def solution(prelude: str = "", headers: str = "", launch: str = LAUNCH, init: str = "", forward: str = "") -> str:
    """The template with its placeholders filled; multi-line `init`/`forward` bodies use 4/8-space indents."""
    forward = forward or "return ext.relu_forward(x.contiguous())"
    return (
        TEMPLATE.replace("PRELUDE", prelude)
        .replace("HEADERS", headers)
        .replace("LAUNCH", launch)
        .replace("INIT", init.replace("\n", "\n    "))
        .replace("FORWARD", forward.replace("\n", "\n        "))
    )


def checks(source: str, device: str = "cuda", **kwargs) -> set[str]:
    return {v.check for v in check_policy(SolutionSource(python=source), device, **kwargs)}


def test_template_is_legit() -> None:
    assert checks(solution()) == set()


@pytest.mark.parametrize(
    "launch",
    [
        "std::thread([=] { relu_kernel<<<1, 256>>>(nullptr, nullptr, 0); }).detach();",
        "auto f = std::async(std::launch::async, [] {});",
        "pthread_t t; pthread_create(&t, nullptr, nullptr, nullptr);",
        "cudaLaunchHostFunc(stream, nullptr, nullptr);",
    ],
    ids=["std_thread", "std_async", "pthread", "host_callback"],
)
def test_rejects_background_work_in_cpp(launch: str) -> None:
    assert checks(solution(launch=launch)) == {"background_thread"}


def test_rejects_threads_spelled_without_std() -> None:
    using = "using namespace std;"
    assert checks(solution(headers=using, launch="thread t([] {}); t.join();")) == {"background_thread"}
    assert checks(solution(headers=using, launch="static auto f = async(launch::async, [] {});")) == {
        "background_thread"
    }
    assert checks(solution(headers="namespace s = std;")) == {"dynamic_code"}


def test_rejects_thread_headers() -> None:
    assert checks(solution(headers="#include <thread>\n#include <future>")) == {"forbidden_library"}


def test_rejects_python_threads() -> None:
    assert checks(solution(prelude="import threading")) == {"forbidden_import"}


def test_rejects_torch_async_helpers() -> None:
    forward = "future = torch.jit.fork(ext.relu_forward, x)\nreturn ext.relu_forward(x)"
    assert checks(solution(forward=forward)) == {"background_thread", "torch_compute_in_forward"}


def test_accepts_openmp() -> None:
    launch = "#pragma omp parallel for\n    for (int64_t i = 0; i < n; ++i) {}"
    assert checks(solution(headers="#include <omp.h>", launch=launch)) == set()
