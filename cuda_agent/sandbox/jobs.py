"""Records of the sandbox interface: the jobs a pool runs and the one result each job gets.

Every record is a pydantic model that round-trips through JSON, so the same jobs and results
travel to a child process, a Ray actor or an HTTP client unchanged.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_serializer, field_validator

from cuda_agent.errors import ConfigError, Error, SandboxError
from cuda_agent.judge import JudgeConfig
from cuda_agent.types import Task, Verdict

if TYPE_CHECKING:
    from cuda_agent.tasks import Catalog


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def new_job_id() -> str:
    return uuid.uuid4().hex


class SourceSolution(_Record):
    """A single-file solution given as its source text (written to the job's private folder)."""

    kind: Literal["source"] = "source"
    code: str = Field(description="The solution's source, a file defining ModelNew.")


class PathSolution(_Record):
    """A solution file or workspace folder on the pool's machine, judged in place."""

    kind: Literal["path"] = "path"
    path: str = Field(description="Absolute path of a solution file or workspace folder.")

    @field_validator("path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        """Made absolute here, because the job runs in another folder. A path that is missing when the job runs
        is the judge's SolutionError (checked there, not here: the job may be built before the folder)."""
        return str(Path(value).expanduser().resolve())


Solution = Annotated[SourceSolution | PathSolution, Field(discriminator="kind")]


def solution_of(value: str | Path) -> SourceSolution | PathSolution:
    """A Path is a file or folder judged in place; a str is source text (never guessed from its shape)."""
    return PathSolution(path=str(value)) if isinstance(value, Path) else SourceSolution(code=value)


# Fields a JudgeJob's config never carries to another process or machine: they name this machine's folders.
_LOCAL_FIELDS = {"cache_dir", "timing_lock"}


def portable_config(config: JudgeConfig) -> dict[str, Any]:
    """The fields of `config` its caller set, as JSON, minus this machine's folders: what travels to a runner."""
    return config.model_dump(mode="json", exclude_unset=True, exclude=_LOCAL_FIELDS)


def judge_config(config: JudgeConfig | Mapping[str, Any] | None) -> JudgeConfig:
    """`config` as a JudgeConfig, validated here once (fields left out keep their defaults).

    Raises:
        ConfigError: a field is unknown or invalid.
    """
    if isinstance(config, JudgeConfig):
        return config
    try:
        return JudgeConfig(**dict(config or {}))
    except ValidationError as exc:
        raise ConfigError(f"invalid judge config: {exc}".replace("\n", " ")) from None


class JudgeJob(_Record):
    """Judge one candidate: the judge's Verdict comes back in `JobResult.verdict`."""

    kind: Literal["judge"] = "judge"
    id: str = Field(default_factory=new_job_id, description="Unique per pool; the result carries the same id.")
    task: Task = Field(description="The task: its reference names the verdict, its code is what is judged against.")
    solution: Solution = Field(description="Source text, or the path of a solution file or workspace folder.")
    config: JudgeConfig = Field(
        default_factory=JudgeConfig,
        description="Judge settings; only the fields set travel (the pool fills device and the candidate's user).",
    )
    timeout_s: float | None = Field(
        default=None, description="Wall limit of the whole job; None: the judge's own stage limits plus a margin."
    )
    gpu: int | None = Field(
        default=None,
        ge=0,
        description=(
            "Run the correctness-and-timing stage on this GPU, numbered as on its machine (nvidia-smi, "
            "CUDA_VISIBLE_DEVICES), alone as always; on a pool without GPUs, on this CPU timing slot or actor. "
            "None: the first free one. A pool that has no such GPU refuses the job at submit. A pinned job is "
            "judged afresh there, not answered from the verdict cache, unless its config sets verdict_cache."
        ),
    )

    @field_serializer("config")
    def _set_fields_only(self, config: JudgeConfig) -> dict[str, Any]:
        """Only the fields the caller set, minus this machine's folders: the runner (maybe on another machine)
        fills the rest with its own defaults, and can still tell a field left out from one set (verdict_cache)."""
        return portable_config(config)


def make_judge_job(
    task: Task | str, solution: str | Path, config: JudgeConfig | Mapping[str, Any] | None = None, **fields: Any
) -> JudgeJob:
    """The JudgeJob for `solution` (a Path: judged in place; a str: source text) on `task` (see `task_of`).

    Raises:
        TaskError: the reference names no task.  ConfigError: the config is invalid.
    """
    return JudgeJob(task=task_of(task), solution=solution_of(solution), config=judge_config(config), **fields)


def task_of(task: Task | str, ref: str | None = None, catalog: Catalog | None = None) -> Task:
    """A Task as is; task source (text defining `class Model`) as an inline task named `ref` (default
    'inline/<digest>'); any other text as a reference the catalog resolves (TaskError if it names none)."""
    if isinstance(task, Task):
        return task
    if "\n" in task and "class Model" in task:
        ref = ref or f"inline/{hashlib.sha256(task.encode()).hexdigest()[:12]}"
        return Task(ref=ref, name=ref.rsplit("/", 1)[-1], source="inline", code=task)
    from cuda_agent.tasks import Catalog

    return (catalog or Catalog()).resolve(task)


class CommandJob(_Record):
    """Run one command (e.g. `bash utils/compile.sh`) in a workspace folder."""

    kind: Literal["command"] = "command"
    id: str = Field(default_factory=new_job_id, description="Unique per pool; the result carries the same id.")
    argv: list[str] = Field(min_length=1, description="Program and arguments; no shell unless argv says 'bash -c'.")
    cwd: str = Field(description="Working folder, usually a workspace; must exist.")
    timeout_s: float = Field(default=600.0, gt=0, description="Wall limit; the whole process group is killed then.")
    output_cap: int = Field(default=20_000, ge=256, description="Most characters kept of stdout and of stderr each.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables.")
    timing: bool = Field(
        default=False, description="Needs an exclusive timing slot (a GPU), e.g. `python -m utils.profiling`."
    )
    protected: list[str] = Field(
        default_factory=list,
        description="Paths under cwd the command must not change; made read-only, checked and restored after. "
        "Relative and inside cwd: an absolute path or one with '..' is refused.",
    )

    @field_validator("protected")
    @classmethod
    def _inside_cwd(cls, paths: list[str]) -> list[str]:
        """The sandbox snapshots, chmods and rewrites these paths as root: none may name a place outside cwd."""
        leaving = [p for p in paths if not p or Path(p).is_absolute() or ".." in Path(p).parts]
        if leaving:
            raise ValueError(f"protected paths must be relative and stay inside cwd (no '..'): {leaving}")
        return paths


Job = Annotated[JudgeJob | CommandJob, Field(discriminator="kind")]


class CommandResult(_Record):
    """How a command ended."""

    exit_code: int | None = Field(description="Exit status; negative for a signal; None if killed at the time limit.")
    stdout: str = Field(description="Standard output, trimmed to the job's output_cap (head and tail).")
    stderr: str = Field(description="Standard error, trimmed the same way.")
    cut_chars: int = Field(default=0, ge=0, description="Characters of stdout and stderr left out by that trimming.")
    wall_s: float = Field(description="Wall time of the command in seconds.")
    timed_out: bool = Field(default=False, description="Killed at the job's time limit.")
    tampered: list[str] = Field(default_factory=list, description="Protected paths it changed (restored since).")
    user: str | None = Field(default=None, description="The unprivileged user it ran as; None: the service's own.")
    isolation: list[str] = Field(
        default_factory=list,
        description="Isolation not applied, and why (e.g. 'stayed root: nobody cannot reach ...').",
    )


JobStatus = Literal["done", "failed", "cancelled"]


class JobResult(_Record):
    """The one result of one job. `done` carries a verdict or a command result; `failed` an error of ours."""

    job_id: str = Field(description="Id of the job this answers.")
    kind: Literal["judge", "command"] = Field(description="Kind of the job.")
    status: JobStatus = Field(description="done, failed (our fault or bad input: see error) or cancelled.")
    verdict: Verdict | None = Field(default=None, description="The judge's verdict (judge jobs that are done).")
    command: CommandResult | None = Field(default=None, description="The command's outcome (command jobs).")
    error: str | None = Field(default=None, description="Why the job failed, in words that say what to do.")
    error_type: str | None = Field(
        default=None,
        description="Class name of the error (cuda_agent.errors), e.g. 'JudgeInfraError' (ours) or 'TaskError' (input).",
    )
    queued_s: float = Field(default=0.0, description="Seconds between submit and the first stage starting.")
    run_s: float = Field(default=0.0, description="Seconds spent running (all stages).")
    worker: str = Field(default="", description="Which worker or slot ran the last stage, e.g. 'build-1', 'timing-0'.")
    hardening: dict[str, Any] = Field(default_factory=dict, description="Limits applied and isolation warnings.")

    def verdict_or_raise(self) -> Verdict:
        """The verdict of a judge job that is done; otherwise the job's error, raised as its own type.

        The same call gives the same result or exception whichever pool (or the HTTP client) ran the job.

        Raises:
            InfraError: ours (JudgeInfraError, SandboxError, ...): retry or drop the sample, never score it.
            Error: the input was wrong (TaskError, SolutionError, ConfigError).
        """
        if self.status == "done" and self.verdict is not None:
            return self.verdict
        if self.status == "cancelled":
            raise SandboxError(f"job {self.job_id} was cancelled (or its pool shut down) before a verdict")
        raise error_class(self.error_type)(self.error or f"job {self.job_id} ended {self.status} without a verdict")

    def command_or_raise(self) -> CommandResult:
        """The outcome of a command job that ran; otherwise the job's error, raised as its own type (as above)."""
        if self.status == "done" and self.command is not None:
            return self.command
        if self.status == "cancelled":
            raise SandboxError(f"job {self.job_id} was cancelled (or its pool shut down) before its command ended")
        raise error_class(self.error_type)(self.error or f"job {self.job_id} ended {self.status} without a result")


def error_class(name: str | None) -> type[Error]:
    """Our exception class called `name` (as JobResult.error_type names it); SandboxError for anything unknown."""
    pending, found = [Error], {}
    while pending:
        cls = pending.pop()
        found[cls.__name__] = cls
        pending.extend(cls.__subclasses__())
    return found.get(name or "", SandboxError)


class PoolMetrics(_Record):
    """A pool's counters since it started."""

    queue_depth: int = Field(description="Jobs submitted and not yet started.")
    running: int = Field(description="Jobs running now.")
    submitted: int = Field(description="Jobs accepted.")
    completed: int = Field(description="Jobs answered (any status).")
    by_status: dict[str, int] = Field(description="Answered jobs per status.")
    by_verdict: dict[str, int] = Field(description="Judge jobs per verdict.")
    by_error: dict[str, int] = Field(
        default_factory=dict,
        description="Failed jobs per error class, e.g. {'JudgeInfraError': 2, 'TaskError': 1}: ours are never verdicts.",
    )
    latency_s: dict[str, float] = Field(description="p50 / p90 / p99 / max of submit-to-result seconds.")
    workers: dict[str, int] = Field(description="Worker counts per kind, e.g. {'build': 2, 'timing': 1}.")
    cpus: dict[str, list[int]] = Field(
        default_factory=dict, description="Cores of the builds and of each timing worker when pinned; empty: not."
    )
    busy_s: dict[str, float] = Field(
        default_factory=dict, description="Seconds the workers of each kind spent running stages (busy fractions)."
    )


class Capacity(_Record):
    """What a pool can answer, measured (`GET /stats`): the figures `cuda-agent plan` sizes a judge from."""

    judgements: int = Field(description="Judge jobs answered with a verdict so far (the measurement's size).")
    timing_slots: int = Field(description="GPUs the pool times on (CPU timing slots on a machine without GPUs).")
    worker_s_per_judgement: dict[str, float] = Field(
        description="Worker seconds per judgement, per kind of worker ('build', 'timing'), commands included."
    )
    judgements_per_hour: float | None = Field(description="The pool's capacity: its slower kind of worker's rate.")
    judgements_per_hour_per_gpu: float | None = Field(description="judgements_per_hour / timing_slots.")
    bottleneck: str | None = Field(description="The kind of worker that bounds the rate; None before a judgement.")
    max_pending: int = Field(description="Jobs the queue holds before it answers 503 PoolFullError.")
