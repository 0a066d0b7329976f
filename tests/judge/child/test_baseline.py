"""The baseline process: what it records about a reference's eager and torch.compile timings."""

from __future__ import annotations

import pytest
import torch

from cuda_agent.judge.child import baseline
from cuda_agent.judge.protocol import BaselineRequest
from cuda_agent.tasks import Catalog


def _request() -> BaselineRequest:
    task = Catalog().resolve("examples/relu")
    return BaselineRequest(
        task_code=task.code,
        task_name=task.name,
        device="cpu",
        timing_seed=1,
        compile_mode=None,
        warmup_reps=1,
        min_reps=2,
        max_reps=3,
        target_phase_s=0.01,
    )


def test_a_reference_compile_cannot_handle_is_timed_eager_only(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(model, mode=None):
        raise RuntimeError("backend cannot lower this op")

    monkeypatch.setattr(torch, "compile", refuse)
    result = baseline.run(_request())
    assert result.eager and result.compile is None and "backend cannot lower" in result.compile_error


@pytest.mark.parametrize("oom", [torch.OutOfMemoryError("CUDA out of memory"), MemoryError()])
def test_running_out_of_memory_while_compiling_is_ours_not_a_compile_error(
    monkeypatch: pytest.MonkeyPatch, oom: BaseException
) -> None:
    # Another judgement's memory, not the reference: a compile_error would be cached for good and every later
    # verdict of the task would lose its torch.compile baseline.
    def out_of_memory(model, mode=None):
        raise oom

    monkeypatch.setattr(torch, "compile", out_of_memory)
    with pytest.raises(type(oom)):
        baseline.run(_request())
