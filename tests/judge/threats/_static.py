"""Shared template for the static-policy threat tests: a legit CUDA relu with placeholders.

Each threat file fills PRELUDE / HEADERS / LAUNCH / INIT / FORWARD to plant one hack and asks
`checks()` which static rules fire.
"""

from __future__ import annotations

from cuda_agent.judge.policy import KERNELBENCH_RELAXED, check_policy
from cuda_agent.judge.solution import SolutionSource

POLICY = "cuda-agent"
"""The policy the threat tests judge under; conftest.py runs every test once per policy and sets this."""

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
    kwargs.setdefault("policy", POLICY)
    return {v.check for v in check_policy(SolutionSource(python=source), device, **kwargs)}


def expect(cuda_agent: set[str], kernelbench: set[str] | None = None) -> set[str]:
    """The rules a hack trips under the current policy.

    Under kernelbench: `kernelbench` when given, else cuda-agent's rules less those kernelbench drops
    (KERNELBENCH_RELAXED), which must leave at least one: the hack still fails.
    """
    if POLICY == "cuda-agent":
        return cuda_agent
    if kernelbench is None:
        kernelbench = cuda_agent - KERNELBENCH_RELAXED
        assert kernelbench or not cuda_agent, f"{cuda_agent} all pass under kernelbench: give its outcome there"
    return kernelbench
