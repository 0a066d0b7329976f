"""How a candidate's run ends early: a fault of the candidate's, reported as data (grader.py, timed_calls.py)."""

from __future__ import annotations

from cuda_agent.judge.protocol import RunResult
from cuda_agent.types import Violation

CANDIDATE_STATUSES = ("compile_error", "runtime_error", "incorrect", "rejected")
"""The statuses a run ends with early (`stop`)."""


class Stop(Exception):
    """Ends the run early with a result (a candidate fault, reported as data), raised in the grader only."""

    def __init__(self, result: RunResult) -> None:
        super().__init__(result.message)
        self.result = result


def stop(status: str, stage: str, message: str, violations: list[Violation] | None = None, oom: bool = False) -> Stop:
    """A result that ends the run; `oom`: an allocation of the candidate's failed."""
    return Stop(RunResult(status=status, stage=stage, message=message, violations=violations or [], out_of_memory=oom))


def out_of_memory(exc: BaseException) -> bool:
    """An allocation failure: torch's CUDA OOM, Python's MemoryError, or the CPU allocator's refusal."""
    import torch

    return isinstance(exc, torch.OutOfMemoryError | MemoryError) or "can't allocate memory" in str(exc)
