"""Kernel times on a real GPU: a small task is decided on kernel times, a large one on whole calls; both reported.

Run on a GPU machine: `python -m pytest -q -m gpu tests/judge/test_kernel_time_gpu.py -s` (prints both figures).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.judge.helpers import ROOT, run_judge

pytestmark = pytest.mark.gpu

AXPBY_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """CUDA Agent's example task: out = alpha * x + beta * y on SIZE elements (128 in CA's example)."""

    def __init__(self, alpha: float, beta: float):
        super().__init__()
        self.alpha, self.beta = alpha, beta

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.alpha * x + self.beta * y


def get_inputs():
    return [torch.randn(SIZE), torch.randn(SIZE)]


def get_init_inputs():
    return [2.0, 3.0]
'''

AXPBY_SOLUTION = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void axpby_kernel(const float* x, const float* y, float* out, float a, float b, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + b * y[i];
}

torch::Tensor axpby(torch::Tensor x, torch::Tensor y, double a, double b) {
    auto out = torch::empty_like(x);
    int64_t n = x.numel();
    axpby_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(), (float)a, (float)b, n);
    return out;
}
"""
cpp_source = "torch::Tensor axpby(torch::Tensor x, torch::Tensor y, double a, double b);"
ext = load_inline("axpby_kernel_time", cpp_sources=cpp_source, cuda_sources=cuda_source, functions=["axpby"])


class ModelNew(nn.Module):
    def __init__(self, alpha: float, beta: float):
        super().__init__()
        self.alpha, self.beta = alpha, beta

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return ext.axpby(x.contiguous(), y.contiguous(), self.alpha, self.beta)
'''


def _report(name: str, verdict) -> None:
    t = verdict.timings_ms
    print(
        f"\n{name}: basis {t.basis} ({verdict.env.get('timing_basis')}); whole calls {t.solution} / {t.eager} / "
        f"{t.compile} ms; kernels {t.kernel}; speedup vs eager {verdict.speedup_vs_eager}"
    )


def _axpby(tmp_path: Path, size: int, **config):
    task = tmp_path / f"axpby_{size}.py"
    task.write_text(AXPBY_TASK.replace("SIZE", str(size)))
    return run_judge(tmp_path, str(task), AXPBY_SOLUTION, device="cuda", time=True, policy="kernelbench", **config)


@pytest.mark.parametrize("size", [1 << 14, 1 << 20, 1 << 24])
def test_whole_call_and_kernel_times_by_size(tmp_path: Path, size: int) -> None:
    """Both figures at growing sizes (printed with -s): where they meet, the whole call measures the work."""
    verdict = _axpby(tmp_path, size)
    _report(f"axpby {size}", verdict)
    t = verdict.timings_ms
    assert verdict.verdict == "pass" and t.kernel is not None and 0 < t.kernel.solution <= t.solution


def test_a_small_task_is_decided_on_kernel_times_where_the_basis_is_opted_in(tmp_path: Path) -> None:
    """The kernel basis is opt-in (`JudgeConfig.kernel_basis`): the candidate's kernel time is read in its process."""
    verdict = _axpby(tmp_path, 128, kernel_basis=True)
    _report("axpby 128", verdict)
    assert verdict.verdict == "pass", verdict.message
    t = verdict.timings_ms
    assert t.kernel is not None and 0 < t.kernel.solution < t.solution and 0 < t.kernel.eager < t.eager
    assert t.kernel.compile is not None and t.kernel.solution_ci is not None
    assert t.basis == "kernel", verdict.env["timing_basis"]
    assert verdict.speedup_vs_eager == pytest.approx(t.kernel.eager / t.kernel.solution)


def test_a_large_task_is_decided_on_whole_calls_with_kernel_times_beside(tmp_path: Path) -> None:
    try:
        from cuda_agent.tasks import Catalog

        Catalog().resolve("kernelbench/L1/19")
    except Exception as exc:  # the data set is not beside this checkout
        pytest.skip(str(exc))
    source = (ROOT / "solutions" / "kernelbench" / "L1/19.py").read_text()
    verdict = run_judge(tmp_path, "kernelbench/L1/19", source, device="cuda", time=True)
    _report("L1/19", verdict)
    assert verdict.verdict == "pass", verdict.message
    t = verdict.timings_ms
    assert t.basis == "call" and t.kernel is not None and t.kernel.solution > 0.5 * t.solution
