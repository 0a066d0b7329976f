"""The kernelbench policy's runtime check (policy/runtime.py), in-process on the CPU.

numpy stands in for the candidate's kernel: it writes a tensor's memory without going through torch's
dispatcher, exactly as a compiled kernel does. The judge end to end (with a real compiled extension) is
covered by the threat tests under both policies (tests/judge/threats/) and by the mixed solutions.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from cuda_agent.judge.policy.runtime import custom_time_fraction, torch_only_reason

x = torch.randn(64, 32)
w = torch.randn(32, 48)


def no_sync() -> None:
    return None


def own_relu(t: torch.Tensor) -> torch.Tensor:
    """A 'kernel': relu written through numpy into memory torch only allocated."""
    out = torch.empty_like(t)
    np.maximum(t.numpy(), 0.0, out=out.numpy())
    return out


def own_copy(t: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(t)
    out.numpy()[...] = t.numpy()
    return out


def in_a_thread() -> torch.Tensor:
    box: list[torch.Tensor] = []
    worker = threading.Thread(target=lambda: box.append(torch.relu(x @ w)))
    worker.start()
    worker.join()
    return own_copy(box[0]) * 2.0


@pytest.mark.parametrize(
    "forward",
    [
        lambda: own_relu(x @ w),  # torch matmul, own epilogue
        lambda: own_relu(x) @ w,  # own prologue, torch matmul
        lambda: torch.softmax(own_relu(x @ w), dim=-1) + own_relu(x @ w),  # own result consumed by torch
    ],
    ids=["own_epilogue", "own_prologue", "mixed_twice"],
)
def test_own_kernel_reaching_the_output_passes(forward) -> None:  # noqa: ANN001
    with torch.no_grad():
        assert torch_only_reason(forward, [x, w], no_sync) is None


def test_in_place_own_kernel_on_torch_memory_passes() -> None:
    def forward() -> torch.Tensor:
        y = x @ w
        np.maximum(y.numpy(), 0.0, out=y.numpy())  # rewrites torch's output in place
        return y

    with torch.no_grad():
        assert torch_only_reason(forward, [x, w], no_sync) is None


@pytest.mark.parametrize(
    "forward",
    [
        lambda: torch.relu(x @ w),  # all torch
        lambda: (own_relu(x), torch.relu(x @ w))[1],  # a kernel on the side
        lambda: own_copy(torch.relu(x @ w)),  # a kernel that copies torch's result
        lambda: torch.relu(own_copy(x) @ w),  # a kernel that copies an input torch then uses
        lambda: own_copy(torch.relu(x @ w)) * 1.0,  # a copy rewritten unchanged
    ],
    ids=["all_torch", "side_kernel", "copy_of_result", "copy_of_input", "copy_times_one"],
)
def test_decoy_kernels_are_found(forward) -> None:  # noqa: ANN001
    with torch.no_grad():
        reason = torch_only_reason(forward, [x, w], no_sync)
    assert reason is not None and "torch's work alone" in reason


def test_torch_on_another_thread_is_found() -> None:
    with torch.no_grad():
        reason = torch_only_reason(in_a_thread, [x, w], no_sync)
    assert reason is not None and "another thread" in reason and "matmul" in reason


def test_fraction_is_zero_for_torch_alone_and_none_for_nothing() -> None:
    with torch.no_grad():
        assert custom_time_fraction(lambda: torch.relu(x @ w), "cpu", no_sync) == 0.0
        assert custom_time_fraction(lambda: None, "cpu", no_sync) is None
