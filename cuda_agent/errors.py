"""Exceptions for faults of ours or of the user's input (never for a candidate's faults).

A candidate that fails to compile or computes the wrong answer is data (a `Verdict`);
everything here means the caller asked for something impossible or our infrastructure broke,
and the message says what to do about it.

Two families matter to whoever turns judgements into rewards:
- `InfraError` (ours: the judge's own crash or out-of-memory, no GPU, a worker that died before
  loading the candidate, a failed baseline, a pool shutting down or full): there is no verdict and
  no reward. Trainers and benchmarks drop such a sample and count it; they never score it.
- everything else (`ConfigError`, `TaskError`, `SolutionError`, ...): the input is wrong; fix it.
"""


class Error(Exception):
    """Base of every cuda-agent exception."""


class ConfigError(Error):
    """A configuration value or combination is invalid."""


class TaskError(Error):
    """A task reference cannot be resolved or a problem file is broken."""


class DataNotFoundError(TaskError):
    """A bundled data set (KernelBench, Ops-6K) is not where we looked."""


class SolutionError(Error):
    """A solution path or file cannot be read at all (missing, not text)."""


class InfraError(Error):
    """Our failure, neither the candidate's nor the input's: no verdict exists; retry or drop, never score."""


class SandboxError(InfraError):
    """A sandbox or worker process died, or a pool refused or dropped a job, for a reason that is not the candidate's."""


class ServiceUnreachableError(SandboxError):
    """No sandbox service answers at a URL (connection refused, unknown host, another server's 5xx): a trainer
    retries or drops the sample; a user checks the URL they named."""


class PoolFullError(SandboxError):
    """A sandbox pool's queue is full; retry after some results have come back."""


class ProtocolError(InfraError):
    """A message between two of our processes did not fit its record (a bug, or two versions of cuda-agent side by
    side): ours, never a candidate's; the message names the sender and what did not fit."""


class JudgeInfraError(InfraError):
    """The judge itself failed (not the candidate); the judgement must be retried, never scored.

    Args:
        message: what failed and what to do.
        out_of_memory: the failure was an allocation in our own code (input generation, the
            comparison), which another judgement sharing the device can cause: worth one retry alone.
    """

    def __init__(self, message: str, out_of_memory: bool = False) -> None:
        super().__init__(message)
        self.out_of_memory = out_of_memory


class ModelError(Error):
    """A model backend failed: the server refused or broke, a local model cannot load, a replay diverged."""


class ContextLengthError(ModelError):
    """The conversation no longer fits the model's context; the episode must end (it is not retried)."""
