"""Run one stage of one job in a fresh, hardened runner process and turn how it ended into a result.

Shared by the local pool (worker threads) and the Ray pool (actors): whatever the runner does,
crash, hang, fork without end or exit early, this returns exactly one outcome and leaves no
process of the job behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cuda_agent.machine import cache_root
from cuda_agent.sandbox.jobs import CommandJob, CommandResult, JudgeJob
from cuda_agent.sandbox.limits import SandboxLimits, create_pids_cgroup, kill_cgroup
from cuda_agent.sandbox.runner import Phase, RunnerOutcome, RunnerSpec, command_user
from cuda_agent.subproc import child_env, head_and_tail, kill_group, read_record
from cuda_agent.types import Verdict
from cuda_agent.workspace import walk

if TYPE_CHECKING:
    from cuda_agent.sandbox.spare import SpareRunner, Spares

KILL_MARGIN_S = 60.0
NO_VERDICT = "the judge stage reported no verdict (a fault of the sandbox, not of the candidate): retry the job"


@dataclass
class StageHandle:
    """Lets another thread cancel a running stage: the stage's processes are killed at once."""

    cancelled: bool = False
    _proc: subprocess.Popen | None = None
    _cgroup: Path | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            if self._proc is not None:
                kill_group(self._proc.pid)
            if self._cgroup is not None:
                kill_cgroup(self._cgroup, timeout_s=2.0)


@dataclass(frozen=True)
class StageOutcome:
    """How one runner ended."""

    outcome: RunnerOutcome | None
    """What the runner wrote; None if it died first."""
    returncode: int | None
    timed_out: bool
    cancelled: bool
    wall_s: float
    stdout: str
    stderr: str
    tampered: list[str]
    cut_chars: int = 0
    """Characters of stdout and stderr that the output cap left out."""


def run_stage(
    job: JudgeJob | CommandJob,
    phase: Phase,
    limits: SandboxLimits,
    device: str,
    timeout_s: float,
    extra_env: dict[str, str],
    handle: StageHandle | None = None,
    cpus: list[int] | None = None,
    spare: SpareRunner | None = None,
) -> StageOutcome:
    """Start a runner for `phase` of `job` (on `cpus`, if given), wait up to `timeout_s`, kill everything it left.
    `spare`: a judge stage's runner started ahead with these arguments (spare.py), used in place of a new one."""
    handle = handle or StageHandle()
    output_cap = job.output_cap if isinstance(job, CommandJob) else 8000
    with spare.folder if spare else tempfile.TemporaryDirectory(prefix=f"cuda-agent-job-{job.id[:8]}-") as tmp:
        workdir = Path(tmp)
        workdir.chmod(0o755)  # the unprivileged user must be able to enter its own folder
        if spare is not None:
            cgroup = spare.cgroup
        else:
            cgroup = create_pids_cgroup(f"{job.id}-{phase}", limits.max_pids) if limits.max_pids else None
        spec = RunnerSpec(
            job=job,
            phase=phase,
            limits=limits,
            device=device,
            workdir=tmp,
            cgroup=cgroup and str(cgroup),
            cpus=cpus or [],
        )
        (workdir / "spec.json").write_text(spec.model_dump_json())
        snapshot = _protect(job) if isinstance(job, CommandJob) else {}
        env = stage_env(extra_env, device)
        owners: dict[Path, tuple[int, int]] = {}
        try:  # from the first change of owner: whatever was handed over is given back, even on our failure
            if isinstance(job, CommandJob) and os.geteuid() == 0 and Path(job.cwd).is_dir():
                user, _ = command_user(job, limits, env)  # the runner drops to the same user (or says why not)
                hand_over(Path(job.cwd), job.protected, user, owners)
                if user is not None:
                    hand_over(workdir, [], user, {})  # the job's own scratch folder: deleted after, nothing to restore
            start = time.monotonic()
            returncode, timed_out = _run_runner(workdir, env, timeout_s, handle, cgroup, spare)
        finally:
            if cgroup is not None:
                kill_cgroup(cgroup)
            tampered = _restore(job, snapshot) if snapshot else []
            if owners:
                restore_owners(Path(job.cwd), owners)
        wall_s = time.monotonic() - start
        outcome_file = workdir / "outcome.json"
        outcome = (
            read_record(RunnerOutcome, outcome_file.read_text(), "the stage's runner")
            if outcome_file.exists()
            else None
        )
        stdout, stdout_cut = head_and_tail(_read(workdir / "stdout.txt"), output_cap)
        stderr, stderr_cut = head_and_tail(_read(workdir / "stderr.txt"), output_cap)
        return StageOutcome(
            outcome=outcome,
            returncode=returncode,
            timed_out=timed_out,
            cancelled=handle.cancelled,
            wall_s=wall_s,
            stdout=stdout,
            stderr=stderr,
            tampered=tampered,
            cut_chars=stdout_cut + stderr_cut,
        )


def stage_env(extra_env: dict[str, str], device: str) -> dict[str, str]:
    """The environment of a stage's runner on `device`."""
    env = child_env(extra_env)
    # The runner points HOME at its private folder; builds, compiler objects and baseline timings
    # must still land in the one shared cache, or every job would rebuild and re-time from cold.
    env.setdefault("CUDA_AGENT_CACHE", str(cache_root()))
    if device != "cuda":
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def _run_runner(
    workdir: Path,
    env: dict[str, str],
    timeout_s: float,
    handle: StageHandle,
    cgroup: Path | None,
    spare: SpareRunner | None = None,
) -> tuple[int | None, bool]:
    args = [
        sys.executable,
        "-m",
        "cuda_agent.sandbox.runner",
        str(workdir / "spec.json"),
        str(workdir / "outcome.json"),
    ]
    with open(workdir / "stdout.txt", "ab") as out, open(workdir / "stderr.txt", "ab") as err:
        with handle._lock:
            if handle.cancelled:
                return None, False
            if spare is not None:  # it writes to the same two files since its start
                proc = spare.run_stage(workdir / "spec.json", workdir / "outcome.json")
            else:
                proc = subprocess.Popen(
                    args, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True
                )
            handle._proc, handle._cgroup = proc, cgroup
        try:
            return proc.wait(timeout=timeout_s), False
        except subprocess.TimeoutExpired:
            kill_group(proc.pid)
            proc.wait()
            return None, True
        finally:
            kill_group(proc.pid)
            with handle._lock:
                handle._proc = handle._cgroup = None


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def hand_over(
    root: Path, protected: list[str], user: pwd.struct_passwd | None, owners: dict[Path, tuple[int, int]]
) -> None:
    """Record the owner and group of every path under `root` in `owners` and give each one to `user` (None: to no
    one), except the `protected` paths (relative to `root`) and what lies below them; one walk. Each path is
    recorded before it changes hands, so `restore_owners` puts back all that changed even when this raises
    part-way. Links are changed themselves, never what they point to."""
    shielded = {Path(p) for p in protected}
    for path in [root, *walk(root)[0]]:  # never entering linked folders; a path a walk cannot reach is left as it is
        try:
            info = path.lstat()
        except OSError:  # past the longest path there may be, or gone: the command's user made it
            continue
        owners[path] = (info.st_uid, info.st_gid)
        rel = path.relative_to(root)
        if user is not None and rel not in shielded and shielded.isdisjoint(rel.parents):
            os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)


def restore_owners(root: Path, owners: dict[Path, tuple[int, int]]) -> None:
    """Give every path under `root` back to its recorded owner; what the command created goes to root's owner."""
    default = owners[root]
    for path in [root, *walk(root)[0]]:
        with contextlib.suppress(OSError):  # a path no walk reaches (a tree the command made too deep), or gone
            os.chown(path, *owners.get(path, default), follow_symlinks=False)


def _protect(job: CommandJob) -> dict[Path, bytes]:
    """Snapshot the protected files and make them read-only (a real barrier once the user is dropped).

    A symbolic link is never followed (root would read or chmod whatever it points to): a protected path that
    is one, or lies below one, is left out, and so is a link found inside a protected folder."""
    snapshot = {}
    cwd = Path(job.cwd).resolve()
    for rel in job.protected:
        root = cwd / rel
        if root.resolve() != root:  # a link on the way (the job's paths are relative, without '..')
            continue
        files = [root] if root.is_file() else [p for p in walk(root)[0] if p.is_file() and not p.is_symlink()]
        for path in files:
            snapshot[path] = path.read_bytes()
            path.chmod(path.stat().st_mode & ~0o222)
    return snapshot


def _restore(job: CommandJob, snapshot: dict[Path, bytes]) -> list[str]:
    """Put back any protected file the command changed or removed; the changed paths, for the record."""
    tampered = []
    cwd = Path(job.cwd).resolve()
    for path, data in snapshot.items():
        current = path.read_bytes() if path.is_file() else None
        if current is None or hashlib.sha256(current).digest() != hashlib.sha256(data).digest():
            tampered.append(str(path.relative_to(cwd)))
            _clear_way(cwd, path)
            path.write_bytes(data)
            path.chmod(0o444)
    return tampered


def _clear_way(cwd: Path, path: Path) -> None:
    """Make every folder from `cwd` down to `path`'s a real folder and `path` itself free, removing links and
    whatever else the command put there: root then writes inside cwd, never where a link points."""
    for step in [*reversed(path.relative_to(cwd).parents), path.relative_to(cwd)][1:]:
        place = cwd / step
        if place.is_symlink() or (place.exists() and (place == path) == place.is_dir()):
            shutil.rmtree(place) if place.is_dir() and not place.is_symlink() else place.unlink()
        if place != path and not place.exists():
            place.mkdir()


def command_result(stage: StageOutcome) -> CommandResult:
    hardening = stage.outcome.hardening if stage.outcome is not None else None
    return CommandResult(
        exit_code=stage.returncode,
        stdout=stage.stdout,
        stderr=stage.stderr,
        cut_chars=stage.cut_chars,
        wall_s=stage.wall_s,
        timed_out=stage.timed_out,
        tampered=stage.tampered,
        user=hardening.user if hardening else None,
        isolation=hardening.warnings if hardening else [],
    )


def stage_timeout_s(job: JudgeJob, phase: Phase) -> float:
    """Wall limit of one judge stage: the judge's own limits plus a margin, so the judge kills first."""
    if job.timeout_s is not None:
        return job.timeout_s
    cfg = job.config
    if phase == "prepare":
        return cfg.build_timeout_s + KILL_MARGIN_S
    return cfg.build_timeout_s + cfg.run_timeout_s + cfg.baseline_timeout_s + KILL_MARGIN_S


def killed_verdict(job: JudgeJob, stage: StageOutcome) -> Verdict | None:
    """A verdict for a judge stage whose runner produced none: a timeout is the candidate's; a crash is ours."""
    if not stage.timed_out:
        return None
    return Verdict(
        task=job.task.ref,
        verdict="timeout",
        reward=-1,
        correct=False,
        message=f"the sandbox killed the job after {stage.wall_s:.0f} s (its time limit)",
    )


def died_message(stage: StageOutcome) -> str:
    tail = "\n".join(stage.stderr.strip().splitlines()[-8:])
    return (
        f"the sandbox runner died (exit {stage.returncode}) before reporting: {tail or 'no output'}. "
        "This is a fault of the sandbox, not of the candidate: retry the job, and report it if it repeats."
    )


def note_stage(times: dict[str, float], phase: Phase, stage: StageOutcome) -> None:
    """Record where a stage's seconds went in `times` (a verdict's stage_s, under `sandbox.`): the runner's whole
    life, and the part of it outside the judge's call (the interpreter's start, imports, hardening)."""
    times[f"sandbox.{phase}"] = stage.wall_s
    if stage.outcome is not None:
        times[f"sandbox.{phase}.runner"] = max(0.0, stage.wall_s - stage.outcome.step_s)


def stage_fields(job: JudgeJob | CommandJob, stage: StageOutcome, times: dict[str, float] | None = None) -> dict | None:
    """JobResult fields if this stage ends the job (verdict, error, kill, cancel, command); None to go on.
    `times`: the sandbox's seconds so far (note_stage), added to the verdict's stage_s."""
    hardening = stage.outcome.hardening.model_dump() if stage.outcome else {}
    if stage.cancelled:
        return {"status": "cancelled", "hardening": hardening}
    if isinstance(job, CommandJob):
        return {"status": "done", "command": command_result(stage), "hardening": hardening}
    if stage.outcome is None:
        verdict = killed_verdict(job, stage)
        if verdict is not None:
            return {"status": "done", "verdict": verdict}
        return {"status": "failed", "error": died_message(stage), "error_type": "SandboxError"}
    if stage.outcome.error:
        error_type = stage.outcome.error_type
        return {"status": "failed", "error": stage.outcome.error, "error_type": error_type, "hardening": hardening}
    if stage.outcome.verdict is not None:
        verdict = stage.outcome.verdict
        verdict.stage_s.update(times or {})
        return {"status": "done", "verdict": verdict, "hardening": hardening}
    return None


def needs_timing(job: JudgeJob | CommandJob, device: str) -> bool:
    """Whether the job's last stage must hold a timing slot (a GPU, or the CPU timing slot when it times)."""
    if isinstance(job, CommandJob):
        return job.timing
    return device == "cuda" or job.config.time


def run_job(
    job: JudgeJob | CommandJob,
    limits: SandboxLimits,
    device: str,
    env: dict[str, str],
    handle: StageHandle,
    spares: Spares | None = None,
    prepare_spares: Spares | None = None,
) -> dict:
    """Every stage of a job in sequence on one worker (the Ray actor's way); JobResult fields.
    `spares`, `prepare_spares`: the worker's runners started ahead (spare.py) for its judge and prepare stages; a
    stage takes one (replaced at once)."""
    if isinstance(job, CommandJob):
        return stage_fields(job, run_stage(job, "command", limits, device, job.timeout_s, env, handle))
    times: dict[str, float] = {}
    with prepare_spares.taken(device, job.config) if prepare_spares is not None else contextlib.nullcontext() as spare:
        stage = run_stage(job, "prepare", limits, device, stage_timeout_s(job, "prepare"), env, handle, spare=spare)
    note_stage(times, "prepare", stage)
    fields = stage_fields(job, stage, times)
    if fields is not None:
        return fields
    with spares.taken(device, job.config) if spares is not None else contextlib.nullcontext() as spare:
        stage = run_stage(job, "judge", limits, device, stage_timeout_s(job, "judge"), env, handle, spare=spare)
    note_stage(times, "judge", stage)
    return stage_fields(job, stage, times) or {"status": "failed", "error": NO_VERDICT, "error_type": "SandboxError"}
