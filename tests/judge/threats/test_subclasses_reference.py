"""Threat 3: ModelNew inherits (or is) the reference, or overrides nn.Module's machinery (static policy)."""

from __future__ import annotations

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


def test_rejects_subclassing_the_reference() -> None:
    source = solution(prelude="from model import Model").replace("class ModelNew(nn.Module):", "class ModelNew(Model):")
    assert checks(source) == {"forbidden_import", "subclasses_reference"}


def test_rejects_subclassing_through_an_intermediate_class() -> None:
    source = solution(prelude="\nclass Base(nn.Module):\n    pass\n")
    assert checks(source.replace("class ModelNew(nn.Module):", "class ModelNew(Base):")) == {"subclasses_reference"}


def test_rejects_missing_model_new() -> None:
    assert checks(solution().replace("class ModelNew(", "class Model2(")) == {"missing_model_new"}


def test_rejects_rebinding_model_new() -> None:
    assert checks(solution() + "\nModelNew = nn.Identity\n") == {"missing_model_new"}


def test_rejects_overriding_call() -> None:
    assert checks(solution(init="def __call__(self, x):\n    return torch.relu(x)\n")) == {"forbidden_override"}


def test_rejects_overriding_module_methods() -> None:
    assert checks(solution(init="def to(self, *args, **kwargs):\n    return self\n")) == {"forbidden_override"}


def test_rejects_patching_the_class_from_outside() -> None:
    assert checks(solution() + "\nModelNew.forward = lambda self, x: x\n") == {"forbidden_override"}
