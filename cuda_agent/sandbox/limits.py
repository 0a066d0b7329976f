"""OS-level hardening of the processes that run candidate code.

Applied by the sandbox runner to itself, before any candidate code runs, so that every
descendant (the judge's build, candidate and baseline processes, or a workspace command)
inherits it:
- resource limits: address space (not on CUDA, whose driver reserves a huge virtual range),
  CPU seconds, open files, file size, core dumps, processes (the last only binds a non-root user);
- a pids cgroup per job where the cgroup filesystem is writable: a fork bomb stops at `max_pids`,
  root included, and every process of the job is killed at the end even if it left the group;
- a private network namespace (loopback only, down) where the OS allows it;
- an unprivileged user for commands when we run as root and that user can reach the program; in a
  judge job, for the candidate's processes (judge/confine.py: the judge writes the shared caches).

What this does not protect against: reading files that are readable to the job's user; kernel exploits; GPU
memory of other processes on a shared GPU. Each measure that could not be applied is recorded
as a warning in the job's result rather than silently skipped.
"""

from __future__ import annotations

import ctypes
import os
import resource
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
CGROUP_ROOTS = (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup"))


class SandboxLimits(BaseModel):
    """Limits of every process a job starts. None switches a limit off."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    address_space_bytes: int | None = 16 * 2**30
    """RLIMIT_AS per process (skipped for CUDA jobs: the driver maps far more than it uses)."""
    cpu_time_s: int | None = 900
    """RLIMIT_CPU per process; the wall limit of the job is enforced separately."""
    open_files: int | None = 1024
    """RLIMIT_NOFILE per process."""
    file_size_bytes: int | None = 2 * 2**30
    """RLIMIT_FSIZE: the largest file a process may write (builds write ~10-100 MB)."""
    max_pids: int | None = 512
    """Processes and threads per job: a pids cgroup where writable, else RLIMIT_NPROC (non-root only)."""
    network: bool = False
    """False: run in a new network namespace with no interfaces up."""
    user: str | None = "nobody"
    """Commands run as this user when we are root and it can; judge jobs' candidates then run as a user id of
    their own each (JudgeConfig.candidate_user "fresh"), and as us where this is None."""


def rlimits_for(limits: SandboxLimits, device: str) -> tuple[dict[str, int], list[str]]:
    """The rlimits to set for a job on `device`, and the notes on what was left out."""
    wanted = {
        "RLIMIT_CPU": limits.cpu_time_s,
        "RLIMIT_NOFILE": limits.open_files,
        "RLIMIT_FSIZE": limits.file_size_bytes,
        "RLIMIT_CORE": 0,
        "RLIMIT_AS": limits.address_space_bytes,
    }
    notes = []
    if device == "cuda" and limits.address_space_bytes is not None:
        wanted["RLIMIT_AS"] = None
        notes.append("RLIMIT_AS not set: CUDA reserves more virtual address space than any useful limit")
    return {name: value for name, value in wanted.items() if value is not None}, notes


def apply_rlimits(rlimits: dict[str, int]) -> None:
    """Lower each limit (never raise one above the current hard limit)."""
    for name, value in rlimits.items():
        which = getattr(resource, name)
        _soft, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))


def isolate_network() -> str | None:
    """Move this process into a new network namespace; None on success, else why not."""
    libc = ctypes.CDLL(None, use_errno=True)
    flags = CLONE_NEWNET if os.geteuid() == 0 else CLONE_NEWUSER | CLONE_NEWNET
    if libc.unshare(flags) == 0:
        return None
    return f"no network namespace (unshare: {os.strerror(ctypes.get_errno())}); the job can reach the network"


def create_pids_cgroup(job_id: str, max_pids: int) -> Path | None:
    """A pids cgroup for one job, or None where the cgroup filesystem is not writable to us."""
    for root in CGROUP_ROOTS:
        if not (root / "cgroup.procs").exists() or not os.access(root, os.W_OK):
            continue
        group = root / f"cuda-agent-{job_id[:24]}"
        try:
            group.mkdir(exist_ok=True)
            (group / "pids.max").write_text(f"{max_pids}\n")
            return group
        except OSError:
            _remove_quietly(group)
    return None


def join_cgroup(group: Path) -> None:
    (group / "cgroup.procs").write_text(f"{os.getpid()}\n")


def kill_cgroup(group: Path, timeout_s: float = 10.0) -> bool:
    """SIGKILL every process in the group until it is empty, then remove it; False if it stayed busy."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
        except OSError:
            return True
        if not pids:
            _remove_quietly(group)
            return not group.exists()
        for pid in pids:
            try:
                os.kill(pid, 9)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.02)
    return False


def _remove_quietly(group: Path) -> None:
    try:
        group.rmdir()
    except OSError:
        pass


def describe(limits: SandboxLimits, device: str) -> dict[str, Any]:
    """What a job on `device` gets, for the record."""
    rlimits, notes = rlimits_for(limits, device)
    return {"rlimits": rlimits, "notes": notes, "network": limits.network, "max_pids": limits.max_pids}


class Hardening(BaseModel):
    """What the runner applied to itself, reported back with the job's result."""

    model_config = ConfigDict(extra="forbid")

    rlimits: dict[str, int] = Field(default_factory=dict)
    cgroup: str | None = None
    network_isolated: bool = False
    user: str | None = None
    cpus: list[int] = Field(default_factory=list, description="Cores the stage was pinned to; empty: any.")
    warnings: list[str] = Field(default_factory=list)
