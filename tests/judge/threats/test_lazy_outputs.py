"""Threat 7: outputs that compute lazily (tensor subclasses, torch function modes, hooks, finalizers).

The static policy's cases come first, then the runtime defences with the judge end to end.
"""

from __future__ import annotations

from pathlib import Path

from cuda_agent.judge.policy import check_policy
from cuda_agent.judge.solution import SolutionSource
from tests.judge.threats._hacks import checks_of, judge_hack

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


def test_rejects_tensor_subclass_with_torch_function() -> None:
    prelude = (
        "\nclass Lazy(torch.Tensor):\n    @classmethod\n"
        "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n        return func(*args)\n"
    )
    assert checks(solution(prelude=prelude)) == {"lazy_output_hooks"}


def test_rejects_make_subclass() -> None:
    forward = "return torch.Tensor._make_subclass(torch.Tensor, ext.relu_forward(x))"
    assert checks(solution(forward=forward)) == {"lazy_output_hooks", "torch_compute_in_forward"}


def test_rejects_forward_hooks() -> None:
    init = "def __init__(self):\n    super().__init__()\n    self.register_forward_hook(lambda m, i, o: o)\n"
    assert checks(solution(init=init)) == {"lazy_output_hooks"}


def test_rejects_finalizers() -> None:
    assert checks(solution(init="def __del__(self):\n    pass\n")) == {"lazy_output_hooks", "forbidden_override"}


def test_rejects_dispatch_modes() -> None:
    prelude = (
        "from torch.utils._python_dispatch import TorchDispatchMode\n\n\nclass Mode(TorchDispatchMode):\n    pass\n"
    )
    source = solution(prelude=prelude)
    assert checks(source) == {"forbidden_import", "lazy_output_hooks"}


# Runtime: the judge end to end on the CPU, sharing one build of the hack extension (see _hacks.py).


SUBCLASS_OUTPUT = """
class ModelNew(nn.Module):
    class Lazy(torch.Tensor):
        pass

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu(x.contiguous()).as_subclass(ModelNew.Lazy)
"""


def test_runtime_rejects_tensor_subclass_output(tmp_path: Path) -> None:
    verdict = judge_hack(tmp_path, "examples/relu", SUBCLASS_OUTPUT, static_policy=False)
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", {"non_tensor_output"}), verdict.message
