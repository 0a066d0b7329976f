"""Threat 5: work launched on a side stream or graph that the timer does not wait for (static policy)."""

from __future__ import annotations

import pytest

from tests.judge.threats._static import checks, expect, solution


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
    assert checks(solution(launch=launch)) == expect({"side_stream"})


def test_rejects_side_stream_in_python() -> None:
    init = "def __init__(self):\n    super().__init__()\n    self.side = torch.cuda.Stream()\n"
    forward = "with torch.cuda.stream(self.side):\n    return ext.relu_forward(x)"
    assert checks(solution(init=init, forward=forward)) == expect({"side_stream", "torch_compute_in_forward"})
