"""Exceptions for faults of ours or of the user's input (never for a candidate's faults).

A candidate that fails to compile or computes the wrong answer is data (a `Verdict`);
everything here means the caller asked for something impossible or our infrastructure broke,
and the message says what to do about it.
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


class SandboxError(Error):
    """A sandbox or worker process died for a reason that is not the candidate's fault."""


class JudgeInfraError(Error):
    """The judge itself failed (not the candidate); the judgement must be retried, never scored."""


class ModelError(Error):
    """A model backend failed: the server refused or broke, a local model cannot load, a replay diverged."""


class ContextLengthError(ModelError):
    """The conversation no longer fits the model's context; the episode must end (it is not retried)."""
