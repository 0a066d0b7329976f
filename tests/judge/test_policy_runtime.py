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

from cuda_agent.judge.policy.runtime import Tolerance, custom_time_fraction, torch_only_reason

x = torch.randn(64, 32)
w = torch.randn(32, 48)


TOL = Tolerance(atol=1e-2, rtol=1e-2, norm_rtol=1e-2)
"""JudgeConfig's defaults."""


def no_sync() -> None:
    return None


def reason_for(forward) -> str | None:  # noqa: ANN001
    with torch.no_grad():
        return torch_only_reason(forward, [x, w], no_sync, TOL)


def own_relu(t: torch.Tensor) -> torch.Tensor:
    """A 'kernel': relu written through numpy into memory torch only allocated."""
    out = torch.empty_like(t)
    np.maximum(t.numpy(), 0.0, out=out.numpy())
    return out


def own_copy(t: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(t)
    out.numpy()[...] = t.numpy()
    return out


def own_nudge(t: torch.Tensor) -> torch.Tensor:
    """A red-team 'kernel' (2026-12-05): moves torch's largest element by one ulp, in place."""
    a = t.numpy().reshape(-1)
    i = int(np.abs(a).argmax())
    a[i] = np.nextafter(a[i], np.float32(np.inf))
    return t


def own_scale(t: torch.Tensor, factor: float) -> torch.Tensor:
    out = torch.empty_like(t)
    np.multiply(t.numpy(), np.float32(factor), out=out.numpy())
    return out


def own_one_element(t: torch.Tensor) -> torch.Tensor:
    """Copies torch's result and recomputes its first element itself."""
    out = own_scale(t, 1.0)
    out.numpy().reshape(-1)[0] = max(float(np.dot(x[0].numpy().astype(np.float64), w[:, 0].numpy())), 0.0) + 1e-4
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
    assert reason_for(forward) is None


def test_a_small_epilogue_that_changes_the_result_visibly_passes() -> None:
    # torch did the heavy part; the kernel's scale moves every value by 10 %: the check can see its work.
    assert reason_for(lambda: own_scale(torch.relu(x @ w), 1.1)) is None


def test_in_place_own_kernel_on_torch_memory_passes() -> None:
    def forward() -> torch.Tensor:
        y = x @ w
        np.maximum(y.numpy(), 0.0, out=y.numpy())  # rewrites torch's output in place
        return y

    assert reason_for(forward) is None


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
    reason = reason_for(forward)
    assert reason is not None and "torch's work alone" in reason


@pytest.mark.parametrize(
    "forward",
    [
        lambda: own_nudge(torch.relu(x @ w)),  # the red team's: one element moved by one ulp, in place
        lambda: own_scale(torch.relu(x @ w), 1.0001),  # torch's result scaled by 1.0001
        lambda: own_one_element(torch.relu(x @ w)),  # one element recomputed
        lambda: own_nudge(torch.relu(x @ w)) * 2.0,  # the token result, then torch again
    ],
    ids=["ulp_nudge", "scale_1_0001", "one_element", "nudge_then_torch"],
)
def test_token_kernels_on_torch_s_result_are_found(forward) -> None:  # noqa: ANN001
    reason = reason_for(forward)
    assert reason is not None and "token kernel" in reason


def test_torch_on_another_thread_is_found() -> None:
    reason = reason_for(in_a_thread)
    assert reason is not None and "another thread" in reason and "matmul" in reason


def test_fraction_is_zero_for_torch_alone_and_none_for_nothing() -> None:
    with torch.no_grad():
        assert custom_time_fraction(lambda: torch.relu(x @ w), "cpu", no_sync) == 0.0
        assert custom_time_fraction(lambda: None, "cpu", no_sync) is None


def test_fraction_counts_the_own_clock_as_the_candidate_s() -> None:
    # Triton's interpreted launches are Python, not an extension's calls: their seconds come on an own clock.
    import time

    clock = [0.0]

    def forward() -> torch.Tensor:
        start = time.perf_counter()
        time.sleep(0.005)  # the candidate's own work
        clock[0] += time.perf_counter() - start
        return torch.relu(x @ w)

    with torch.no_grad():
        share = custom_time_fraction(forward, "cpu", no_sync, own_clock=lambda: clock[0])
        assert share is not None and 0.0 < share < 1.0
        assert custom_time_fraction(forward, "cpu", no_sync) == 0.0
