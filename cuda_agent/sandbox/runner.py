"""The child process that runs one stage of one job: `python -m cuda_agent.sandbox.runner SPEC OUT`.

A pool starts a fresh runner for every stage of every job, in a new session, so a fault of any
kind ends with that process. The runner hardens itself first (limits.py) and only then runs the
judge or replaces itself with the job's command, so every candidate process inherits the limits.
It writes one JSON outcome to OUT (for a command: before exec, the hardening it applied).
"""

from __future__ import annotations

import os
import pwd
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from cuda_agent.errors import Error
from cuda_agent.judge import JudgeConfig
from cuda_agent.sandbox.jobs import CommandJob, Job, JudgeJob, PathSolution, SourceSolution
from cuda_agent.sandbox.limits import (
    Hardening,
    SandboxLimits,
    apply_rlimits,
    isolate_network,
    join_cgroup,
    rlimits_for,
)
from cuda_agent.subproc import drop_privileges, read_record, unprivileged_user
from cuda_agent.types import Verdict

if TYPE_CHECKING:
    from cuda_agent.sandbox.spare import SpareSpec

Phase = Literal["prepare", "judge", "command"]


class RunnerSpec(BaseModel):
    """What one runner does."""

    model_config = ConfigDict(extra="forbid")

    job: Job
    phase: Phase
    limits: SandboxLimits
    device: str
    """Resolved device ('cpu' or 'cuda') of the job."""
    workdir: str
    """Private folder of this stage (HOME and TMPDIR point here)."""
    cgroup: str | None = None
    cpus: list[int] = []
    """Cores this stage may run on (cpu_sets.py); empty: any."""


class RunnerOrder(BaseModel):
    """A runner's two arguments: a fresh runner's command line, or the one line a spare runner (spare.py) reads on
    stdin when the pool hands it its stage."""

    model_config = ConfigDict(extra="forbid")

    spec_file: str
    """Its RunnerSpec."""
    out_file: str
    """Where it writes its RunnerOutcome."""


class RunnerOutcome(BaseModel):
    """What a runner reports."""

    model_config = ConfigDict(extra="forbid")

    verdict: Verdict | None = None
    """prepare: the failing verdict, or None to go on; judge: the verdict."""
    error: str | None = None
    """Our failure or bad input (unknown task, unreadable solution), never the candidate's."""
    error_type: str | None = None
    """Class name of that error (cuda_agent.errors), so the caller can raise it as the same type."""
    hardening: Hardening = Hardening()
    step_s: float = 0.0
    """Seconds in the judge's call (prepare or judge): the rest of the stage's wall is the runner's own start."""


def command_user(
    job: CommandJob, limits: SandboxLimits, env: Mapping[str, str]
) -> tuple[pwd.struct_passwd | None, str | None]:
    """The unprivileged user a command job runs as (None: it stays root), and why not.

    Asked twice with the same inputs: by the pool, which hands the workspace over to that user before the runner
    starts, and by the runner (`env` is its environment), which drops to it.
    """
    path = job.env.get("PATH", env.get("PATH", ""))
    # Workspace commands run Python (utils/compile.sh execs it): the user must reach the one on PATH too,
    # or the command would fail as `python: not found` with no word of why.
    python = _which(job.env.get("CUDA_AGENT_PYTHON") or env.get("CUDA_AGENT_PYTHON") or "python", path)
    programs = [p for p in (_which(job.argv[0], path), python) if p is not None] or [Path(sys.executable)]
    return unprivileged_user(limits.user, [*programs, Path(job.cwd)])


def harden(spec: RunnerSpec | SpareSpec) -> Hardening:
    """Apply the job's limits to this process; returns what was applied and what was not."""
    report = Hardening()
    if spec.cpus:
        os.sched_setaffinity(0, spec.cpus)  # before anything starts: every child inherits it
        report.cpus = spec.cpus
    if spec.cgroup:
        try:
            join_cgroup(Path(spec.cgroup))
            report.cgroup = spec.cgroup
        except OSError as exc:
            report.warnings.append(f"could not join the pids cgroup ({exc}); a fork bomb is bounded only by nproc")
    rlimits, notes = rlimits_for(spec.limits, spec.device)
    report.warnings += notes
    if spec.limits.max_pids is not None and os.geteuid() != 0:
        rlimits["RLIMIT_NPROC"] = spec.limits.max_pids
    apply_rlimits(rlimits)
    report.rlimits = rlimits
    if not spec.limits.network:
        why_not = isolate_network()
        report.network_isolated = why_not is None
        if why_not:
            report.warnings.append(why_not)
    if isinstance(spec, RunnerSpec) and spec.phase == "command":
        assert isinstance(spec.job, CommandJob)
        user, why_not = command_user(spec.job, spec.limits, os.environ)
        if why_not:
            report.warnings.append(why_not)
        if user is not None:  # the pool handed the workspace and the private folder over (execution.hand_over)
            drop_privileges(user)
            report.user = user.pw_name
    elif os.geteuid() == 0:
        report.warnings.append(
            "the judge runs as root (it writes the shared caches); the candidate's processes drop to a user id of "
            "their own where they can: the verdict's env says so (candidate_user) or why not"
        )
    return report


def solution_path(solution: SourceSolution | PathSolution, workdir: Path) -> Path:
    """A path is judged in place; source text is written to the stage's private folder first."""
    if isinstance(solution, PathSolution):
        return Path(solution.path)
    path = workdir / "solution.py"
    path.write_text(solution.code)
    return path


def stage_config(job: JudgeJob, spec: RunnerSpec | SpareSpec) -> JudgeConfig:
    """The job's config with what only the pool knows: the resolved device, the candidate's user, and no cached
    verdict for a job pinned to a GPU (the caller asked for that GPU's own judgement) unless it set one."""
    update: dict[str, object] = {"device": spec.device}
    if "candidate_user" not in job.config.model_fields_set and spec.limits.user is None:
        update["candidate_user"] = None  # the pool drops no one: its candidates run as it does
    if job.gpu is not None and "verdict_cache" not in job.config.model_fields_set:
        update["verdict_cache"] = False
    return job.config.model_copy(update=update)


def run_judge_phase(spec: RunnerSpec, judge_step: Callable[..., Verdict] | None = None) -> RunnerOutcome:
    """`judge_step`: the stage's call in place of `judge` or `prepare` (a spare runner's, with its standby:
    spare.py)."""
    from cuda_agent.judge import judge, prepare

    job = spec.job
    assert isinstance(job, JudgeJob)
    try:
        solution = solution_path(job.solution, Path(spec.workdir))
        step = judge_step or (prepare if spec.phase == "prepare" else judge)
        start = time.monotonic()
        verdict = step(job.task, solution, stage_config(job, spec))
        return RunnerOutcome(verdict=verdict, step_s=time.monotonic() - start)
    except Error as exc:
        return RunnerOutcome(error=f"{type(exc).__name__}: {exc}", error_type=type(exc).__name__)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--spare"]:  # a judge stage's runner started ahead of its job (spare.py)
        from cuda_agent.sandbox.spare import serve

        return serve(argv[1])
    spec = read_record(RunnerSpec, Path(argv[0]).read_text(), "the pool")
    out = Path(argv[1])
    workdir = Path(spec.workdir)
    os.environ.update({"HOME": str(workdir), "TMPDIR": str(workdir)})
    if spec.phase == "command":
        job = spec.job
        assert isinstance(job, CommandJob)
        report = harden(spec)
        out.write_text(RunnerOutcome(hardening=report).model_dump_json())
        os.chdir(job.cwd)
        os.execvpe(job.argv[0], job.argv, {**os.environ, **job.env})
    report = harden(spec)
    outcome = run_judge_phase(spec)
    outcome.hardening = report
    out.write_text(outcome.model_dump_json())
    return 0


def _which(program: str, path: str) -> Path | None:
    if "/" in program:
        return Path(program).resolve() if Path(program).exists() else None
    for folder in path.split(os.pathsep):
        candidate = Path(folder) / program
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate.resolve()
    return None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
