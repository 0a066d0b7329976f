"""Threat 5: work launched on a side stream or graph that the timer does not wait for (static policy)."""

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
        "cudaStream_t s; cudaStreamCreate(&s); relu_kernel<<<1, 256, 0, s>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);",
        "cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);",
        "auto s = at::cuda::getStreamFromPool(); relu_kernel<<<1, 256, 0, s>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);",
        "cudaGraphExec_t g; cudaGraphLaunch(g, stream);",
        "relu_kernel<<<1, 256, 0, cudaStreamPerThread>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);",
    ],
    ids=["create", "non_blocking", "pool", "graph", "per_thread"],
)
def test_rejects_side_stream_in_cpp(launch: str) -> None:
    assert checks(solution(launch=launch)) == {"side_stream"}


def test_rejects_side_stream_in_python() -> None:
    init = "def __init__(self):\n    super().__init__()\n    self.side = torch.cuda.Stream()\n"
    forward = "with torch.cuda.stream(self.side):\n    return ext.relu_forward(x)"
    assert checks(solution(init=init, forward=forward)) == {"side_stream", "torch_compute_in_forward"}
