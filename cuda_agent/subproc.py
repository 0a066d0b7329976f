"""Run a child Python process in its own process group, with a time limit that kills the group.

Used wherever untrusted or heavy code runs (task inspection, the judge's build and run workers):
a child that hangs, forks or crashes ends only itself and its descendants.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ChildResult:
    """How a child process ended."""

    returncode: int | None
    """Exit status; negative for a signal; None if it was killed at the time limit."""
    stdout: str
    stderr: str
    timed_out: bool
    wall_s: float


def run_module(
    module: str,
    args: list[str],
    timeout_s: float,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    stdin_text: str | None = None,
    output_cap: int = 200_000,
) -> ChildResult:
    """Run `python -m module *args` in a new session; kill its whole process group at `timeout_s`.

    Args: as `run_command`, with the module's dotted name and its command-line arguments.
    """
    return run_command([sys.executable, "-m", module, *args], timeout_s, cwd, env, stdin_text, output_cap)


def run_command(
    argv: list[str],
    timeout_s: float,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    stdin_text: str | None = None,
    output_cap: int = 200_000,
    grace_s: float = 2.0,
) -> ChildResult:
    """Run `argv` in a new session; kill its whole process group at `timeout_s`.

    Args:
        argv: the program and its arguments.
        timeout_s: wall-clock limit in seconds.
        cwd: working directory (defaults to the caller's).
        env: full environment; defaults to ours.
        stdin_text: text written to the child's stdin.
        output_cap: keep at most this many characters of each of stdout and stderr (the tail).
        grace_s: after the limit, how long the group has between SIGTERM and SIGKILL.
    """
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    timed_out = False
    try:
        out, err = proc.communicate(stdin_text, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        # SIGTERM first: our workers dump their stacks on it (faulthandler), so a hang can be located.
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            out, err = proc.communicate(timeout=grace_s)
        except (ProcessLookupError, PermissionError, subprocess.TimeoutExpired):
            kill_group(proc.pid)
            out, err = proc.communicate()
    finally:
        # Descendants that outlived a normal exit (daemons, stray forks) go too.
        kill_group(proc.pid)
    return ChildResult(
        returncode=None if timed_out else proc.returncode,
        stdout=out[-output_cap:],
        stderr=err[-output_cap:],
        timed_out=timed_out,
        wall_s=time.monotonic() - start,
    )


def kill_group(pgid: int) -> None:
    """SIGKILL a process group, ignoring one that is already gone."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Our environment with the repository importable and Python output unbuffered."""
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env
