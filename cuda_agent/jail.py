"""The program that holds a confined child: it starts it in PID, mount and network namespaces of its own, as PID 1.

Run as root, as `python -I -S jail.py SPEC_JSON ARGV...` (subproc.run_command and judge/standby.py start it for a
`Confinement`; it imports nothing outside the standard library, so it runs before, and apart from, our packages).

Three processes: this one (the holder, outside the namespaces: the process the grader started, in the grader's
process group), its child `init` (PID 1 of the new PID namespace, root, in the same group) and init's child, the
target, which execs ARGV after dropping to the spec's user. When the target ends, init ends, and the kernel
kills everything else in the namespace: a daemon the candidate started (`setsid`, a double fork, `clone`) dies
with it. When the grader kills the process group, holder and init die (the candidate can leave the group, never
take init out of it: init is root), and with init the whole namespace. When the grader dies, the holder dies
(its parent-death signal, set by the grader), then init (its own, tied to the holder). The holder ends as the
target did: the same exit code, or killed by the same signal.

Mounts, made by init before the target starts, seen by nobody outside: a fresh /proc (the candidate sees only
its own processes); `reach`, the paths the target needs (interpreter, packages), made reachable where a folder
on their way is closed to others (a venv under /root, mode 0700): that folder is covered by an empty tmpfs in
which only the needed paths are bound back, read-only, so nothing else there shows; `hidden`, folders covered
by an empty tmpfs (the shared caches: builds, baselines, verdicts, GPU turns); `shown`, paths under them bound
back read-only (the fast-build objects a build reads); `binds`, (source, target) folders mounted over their
targets (a candidate's private copy of its build). `bind_mounts` is also called by a standby (root in its
namespace until its request) for the mounts of its request.

A network namespace too (`network_namespace`), with no interface up: the target reaches no socket of the machine's
(TCP, UDP, abstract Unix sockets: a service listening on loopback) but one at a path it may open, or one it was given.

With `pid_namespace` false (CUDA's legacy IPC handles do not open across PID namespaces), init is no PID 1 and
the /proc stays the machine's: the target's descendants then die with its process group only, as an
unconfined child's do.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import stat
import sys
from collections.abc import Sequence

CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
PR_SET_PDEATHSIG = 1
SETUP_FAILED = 125
"""The holder's exit code when the namespaces or mounts could not be made (its stderr says why)."""
_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = [s.encode() if s is not None else None for s in (source, target, fstype, data)]
    if _libc.mount(enc[0], enc[1], enc[2], flags, enc[3]) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {source} on {target}: {os.strerror(errno)}")


SHARED_FOLDERS = ("/tmp", "/var/tmp", "/run/lock")
"""Folders anyone may write, shared with every user and service of the machine (Ray keeps its sockets and unpacked
packages under /tmp/ray, in folders of mode 0777; what is left in /run/lock no sweep removes). A target that drops
to a user gets its own of each (`private_folders`)."""


def private_folders(keep: Sequence[str], writable: Sequence[str] = ()) -> None:
    """Cover each of SHARED_FOLDERS with an empty tmpfs of its own (mode 1777, as they are), then bind back the paths
    of `keep` and `writable` that lay below one (the judgement's folders, which machines keep under /tmp), those of
    `keep` read-only: nothing else of anyone's shows there, and what the target leaves there goes with its mount
    namespace."""
    covered = [f for f in SHARED_FOLDERS if os.path.isdir(f) and not os.path.islink(f)]
    paths = {os.path.abspath(p): False for p in keep} | {os.path.abspath(p): True for p in writable}
    opened = {}
    for path in sorted(paths, key=lambda p: (p.count("/"), p)):  # shallowest first: a deeper one lies in its bind
        if any(path.startswith(folder + "/") for folder in covered):
            with contextlib.suppress(OSError):  # not there: nothing to show
                opened[path] = os.open(path, os.O_PATH | os.O_CLOEXEC)
    for folder in covered:
        _mount("cuda-agent-jail", folder, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    for path, fd in opened.items():
        if not os.path.lexists(path):
            os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                os.mkdir(path, 0o755)
            else:
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        if not paths[path]:
            _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY)
        os.close(fd)


def bind_mounts(binds: Sequence[Sequence[str]], hidden: Sequence[str] = (), shown: Sequence[str] = ()) -> None:
    """Cover each folder of `hidden` (where it shows here) with an empty tmpfs; then bind back each path of
    `shown` read-only, and each (source, target) pair's source over its target, making their way reachable
    first (`_open_way`). Sources are opened before anything is covered, so they may lie under a cover."""
    shown = [path for path in shown if os.path.exists(path)]  # one not made yet has nothing to show
    sources = [os.open(path, os.O_PATH | os.O_CLOEXEC) for path in [*shown, *(source for source, _ in binds)]]
    for folder in hidden:
        if os.path.isdir(folder):
            _mount("cuda-agent-jail", folder, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    targets = [*shown, *(target for _, target in binds)]
    for i, (fd, target) in enumerate(zip(sources, targets, strict=True)):
        _open_way(target)
        os.makedirs(target, mode=0o755, exist_ok=True)  # only where a cover of ours hid it (it exists outside)
        _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
        if i < len(shown):
            _mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY)
        os.close(fd)


def expose(paths: Sequence[str]) -> None:
    """Make each of `paths` reachable by any user here, read-only where it had to be bound back.

    Each is opened first (before anything is covered), then, shallowest first: a folder on its way that others
    may not enter is covered by an empty tmpfs (mode 0755), a part missing under such a cover is made, and a path
    that the covers hid is bound back from what was opened. A path that others may not enter itself stays so.
    """
    opened = {}
    for path in sorted(set(paths), key=lambda p: (p.count("/"), p)):
        try:
            opened[path] = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue  # gone since it was listed: nothing to show
    for path, fd in opened.items():
        _open_way(path)
        if not os.path.lexists(path):
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                os.mkdir(path, 0o755)
            else:
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
            _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
            _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY)
        os.close(fd)


def _open_way(path: str) -> None:
    """Cover each folder on the way to `path` that others may not enter, and make the parts our covers hid."""
    parts = [p for p in path.split("/") if p]
    for depth in range(1, len(parts)):
        folder = "/" + "/".join(parts[:depth])
        try:
            mode = os.stat(folder).st_mode
        except FileNotFoundError:
            # Every path given exists outside: a part missing here lies under a cover of ours.
            os.mkdir(folder, 0o755)
            continue
        if not mode & stat.S_IXOTH:
            _mount("cuda-agent-jail", folder, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")


def _die_with(fd_alive: int) -> None:
    """SIGKILL this process when its parent dies; die now if it did already (its end of `fd_alive` reads EOF)."""
    if _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if select.select([fd_alive], [], [], 0)[0]:
        os._exit(SETUP_FAILED)


def _exec_target(spec: dict, argv: list[str]) -> None:
    """In the target: signals as a fresh process has them, its folder (looked up again, through the mounts),
    its user, then ARGV. Nothing after the change of user may import: our own interpreter's library may be out of
    the user's reach (`reach` holds what the target needs, not what we do)."""
    # Ours ignored (the holder's) and Python's own (SIGPIPE, SIGXFSZ), as subprocess restores them for a child.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    os.chdir(spec["cwd"])
    program = _which(argv[0])
    if spec["user"] is not None:
        uid, gid = spec["user"]
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    try:
        os.execv(program, argv)
    except OSError as exc:
        os.write(2, f"jail: cannot run {argv[0]}: {exc}\n".encode())
        os._exit(127)


def _which(name: str) -> str:
    """`name` looked up on PATH as execvp would (here, before any change of user)."""
    if "/" in name:
        return name
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(folder or ".", name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return name


def _init(spec: dict, argv: list[str], fd_alive: int, fd_status: int) -> None:
    """PID 1 of the new namespace: its mounts, then the target; it reaps orphans until the target ends, tells the
    holder how (`fd_status`) and exits, which kills whatever else the namespace holds."""
    try:
        _die_with(fd_alive)
        _mount("none", "/", None, MS_REC | MS_PRIVATE)
        try:
            if spec["pid_namespace"]:
                _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        except OSError as exc:
            print(f"jail: no private /proc ({exc}); the candidate sees the machine's processes", file=sys.stderr)
        os.umask(0o022)
        if spec["user"] is not None:  # a standby (no user yet) makes them on its request (standby.serve_once)
            writable = [spec["cwd"], *(path for pair in spec["binds"] for path in pair)]
            private_folders([*spec["reach"], *spec["hidden"], *spec["shown"]], writable)
        expose(spec["reach"])
        bind_mounts(spec["binds"], spec["hidden"], spec["shown"])
    except OSError as exc:
        print(f"jail: setting up the namespace failed: {exc}", file=sys.stderr)
        os._exit(SETUP_FAILED)
    target = os.fork()
    if target == 0:
        os.close(fd_status)
        _exec_target(spec, argv)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(SETUP_FAILED)
        if pid == target:
            os.write(fd_status, str(status).encode())
            os._exit(0)


def main(argv: list[str]) -> None:
    """The holder: `argv` is [SPEC_JSON, program, arguments...]."""
    spec, target_argv = json.loads(argv[0]), argv[1:]
    # The grader's SIGTERM at a time limit is for the target (our workers dump their stacks on it): the holder
    # and init wait for it to end. Its SIGKILL takes all three.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    try:
        flags = CLONE_NEWNS | (CLONE_NEWPID if spec["pid_namespace"] else 0)
        flags |= CLONE_NEWNET if spec.get("network_namespace", True) else 0
        if _libc.unshare(flags) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET)")
    except OSError as exc:
        print(f"jail: {exc}: {os.strerror(exc.errno or 0)}", file=sys.stderr)
        sys.exit(SETUP_FAILED)
    alive_r, alive_w = os.pipe()
    status_r, status_w = os.pipe()
    init = os.fork()
    if init == 0:
        os.close(alive_w)
        os.close(status_r)
        _init(spec, target_argv, alive_r, status_w)
    os.close(alive_r)
    os.close(status_w)
    _, init_status = os.waitpid(init, 0)
    said = os.read(status_r, 64)
    status = int(said) if said else init_status
    if os.WIFEXITED(status):
        sys.exit(os.WEXITSTATUS(status))
    # Killed by a signal: end the same way, so our caller reads it as it would the target's own end.
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sig = os.WTERMSIG(status)
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
    os._exit(128 + sig)


if __name__ == "__main__":
    main(sys.argv[1:])
