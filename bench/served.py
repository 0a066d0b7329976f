"""A `cuda-agent serve` started beside a benchmark, stopped on every exit with everything it started.

    with served(spares=1, workspace_root=folder, log=out / "serve.log") as service:
        ...  # CUDA_AGENT_SANDBOX_URL=service.url for the processes measured
    service.left  # pids of its processes still alive after it stopped (none, or the benchmark says so)

The service inherits this process's environment (caches, CUDA_AGENT_DATA_DIR), so it judges what the local path
judges with the same caches. `stop_on_sigterm` turns a SIGTERM (bench/device/judge_gpu.sh's `timeout`) into SystemExit,
so that the `with` block's exit still stops the service.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
START_S = 120.0
"""How long the service may take to answer /health (imports torch and FastAPI on a shared 2-core machine)."""
IDLE_TICKS = os.sysconf("SC_CLK_TCK") // 20
"""CPU ticks per half second under which the service counts as idle (a tenth of one core)."""
STOP_S = 60.0
"""How long it may take to close its pool (cancel, close the spares) after SIGTERM before it is killed."""


@dataclass
class Service:
    url: str
    pid: int
    left: list[int] = field(default_factory=list)
    """Its processes (and their descendants) still alive after it stopped; filled when the `with` block exits."""

    def wait_idle(self, cap_s: float = 60.0) -> float:
        """Wait until it and its processes use under a tenth of a core (a spare it started after the last job has
        imported torch and waits), at most `cap_s`; the seconds waited. What is measured next then competes with
        nothing of the service's on a machine of few cores, as a user's next request after reading an answer."""
        start = time.monotonic()
        before = cpu_ticks({self.pid} | descendants(self.pid))
        while time.monotonic() - start < cap_s:
            time.sleep(0.5)
            now = cpu_ticks({self.pid} | descendants(self.pid))
            # A process that ended meanwhile counts nothing; one that started counts all it used.
            if sum(ticks - before.get(pid, 0) for pid, ticks in now.items()) <= IDLE_TICKS:
                break
            before = now
        return round(time.monotonic() - start, 2)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (from /proc: parents as they are now)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def cpu_ticks(pids: set[int]) -> dict[int, int]:
    """User and system CPU ticks each of the live processes `pids` has used."""
    ticks = {}
    for pid in pids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks[pid] = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))
    return ticks


def alive(pid: int) -> bool:
    """Running (a zombie has ended: only its parent's wait is missing)."""
    with contextlib.suppress(OSError, IndexError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return False


def stop_on_sigterm() -> None:
    """SIGTERM raises SystemExit in the main thread, so `finally` blocks (the service's stop) run."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def add_serve_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """`--sandbox local|serve` and `--spares N`, as every served benchmark takes them; `what` says what serve adds."""
    parser.add_argument("--sandbox", choices=["local", "serve"], default="local", help=f"serve: {what}")
    parser.add_argument("--spares", type=int, default=1, help="--sandbox serve: the service's --spares")


@contextlib.contextmanager
def served(
    spares: int, workspace_root: Path | None = None, log: Path | None = None, workers: int | None = None
) -> Iterator[Service]:
    """A `cuda-agent serve --spares N` on a free loopback port, answering /health; stopped on exit."""
    port = free_port()
    cmd = [sys.executable, "-m", "cuda_agent", "serve", "--port", str(port), "--spares", str(spares)]
    if workspace_root is not None:
        cmd += ["--workspace-root", str(workspace_root)]
    if workers is not None:
        cmd += ["--workers", str(workers)]
    with contextlib.ExitStack() as stack:
        err = stack.enter_context(open(log, "ab")) if log is not None else subprocess.DEVNULL
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=err, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
        service = Service(f"http://127.0.0.1:{port}", proc.pid)
        try:
            wait_healthy(service.url, proc)
            yield service
        finally:
            service.left = _stop(proc)


def wait_healthy(url: str, proc: subprocess.Popen | None = None, start_s: float = START_S) -> None:
    """Until `cuda-agent serve` at `url` answers /health; `proc`: the serve we started (its exit ends the wait)."""
    deadline = time.monotonic() + start_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"cuda-agent serve exited ({proc.returncode}) before answering: see its log")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise SystemExit(f"cuda-agent serve did not answer {url}/health within {start_s:g} s")


def _stop(proc: subprocess.Popen) -> list[int]:
    """SIGTERM (uvicorn shuts down, the pool closes its spares), then SIGKILL whatever of it is left."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the stop short
    tree = descendants(proc.pid)  # spares run in sessions of their own: a group kill would miss them
    proc.terminate()
    try:
        proc.wait(timeout=STOP_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    tree |= {p for pid in tree for p in descendants(pid)}
    deadline = time.monotonic() + 15  # a spare whose stdin closed closes its standby and exits by itself
    while time.monotonic() < deadline and any(alive(p) for p in tree):
        time.sleep(0.2)
    left = sorted(p for p in tree if alive(p))
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left
