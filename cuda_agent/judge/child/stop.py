"""How a candidate's run ends early: a fault of the candidate's, reported as data (worker.py, timed_calls.py)."""

from __future__ import annotations

from cuda_agent.judge.protocol import RunResult
from cuda_agent.types import Violation

CANDIDATE_STATUSES = ("runtime_error", "incorrect", "rejected")
"""The only statuses a run ends with early (`stop`): a Stop claiming another was raised by the candidate's code."""


class Stop(Exception):
    """Ends the run early with a result (a candidate fault, reported as data).

    Candidate code can reach this class (it shares the process): every call of the candidate's code turns whatever
    it raises, a Stop too, into a `runtime_error` of its own, and `worker.run` refuses a Stop claiming a status
    outside CANDIDATE_STATUSES (red-team probe 2026-12-06: `raise Stop(RunResult(status="ok", timing=...))` from
    forward passed with reward 3).
    """

    def __init__(self, result: RunResult) -> None:
        super().__init__(result.message)
        self.result = result


def stop(
    status: str, stage: str, message: str, violations: list[Violation] | None = None, cause: Exception | None = None
) -> Stop:
    """A result that ends the run; `cause`: the candidate's exception, when one ended it."""
    oom = cause is not None and out_of_memory(cause)
    return Stop(RunResult(status=status, stage=stage, message=message, violations=violations or [], out_of_memory=oom))


def out_of_memory(exc: BaseException) -> bool:
    """An allocation failure: torch's CUDA OOM, Python's MemoryError, or the CPU allocator's refusal."""
    import torch

    return isinstance(exc, torch.OutOfMemoryError | MemoryError) or "can't allocate memory" in str(exc)
