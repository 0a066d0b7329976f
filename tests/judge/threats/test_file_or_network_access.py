"""Threat 17: reading or writing files, the environment or the network (static policy)."""

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
    ("headers", "launch"),
    [
        ("#include <cstdio>", 'FILE* f = fopen("/tmp/out", "w");'),
        ("#include <cstdlib>", 'const char* home = getenv("HOME");'),
        ("#include <cstdlib>", 'system("curl example.com");'),
        ("", "int s = socket(2, 1, 0);"),
        ("", 'void* h = dlopen("libc.so.6", 1);'),
    ],
    ids=["fopen", "getenv", "system", "socket", "dlopen"],
)
def test_rejects_file_and_network_access_in_cpp(headers: str, launch: str) -> None:
    assert checks(solution(headers=headers, launch=launch)) == {"file_or_network_access"}


def test_rejects_fstream() -> None:
    source = solution(headers="#include <fstream>", launch='std::ifstream in("/etc/passwd");')
    assert checks(source) == {"forbidden_library", "file_or_network_access"}


@pytest.mark.parametrize(
    ("prelude", "expected"),
    [
        ("data = open('/tmp/ref.pt', 'rb').read()", {"file_or_network_access"}),
        ("ref = torch.load('/tmp/ref.pt')", {"file_or_network_access"}),
        ("import socket", {"forbidden_import"}),
        ("import os", {"forbidden_import"}),
    ],
    ids=["open", "torch_load", "socket", "os"],
)
def test_rejects_file_and_network_access_in_python(prelude: str, expected: set[str]) -> None:
    assert checks(solution(prelude=prelude)) == expected


def test_rejects_build_directory() -> None:
    flags = 'functions=["relu_forward"], build_directory="/tmp/x",'
    assert checks(solution().replace('functions=["relu_forward"],', flags)) == {"file_or_network_access"}
