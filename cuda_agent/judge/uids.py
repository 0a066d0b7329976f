"""A user id of its own for each judgement's candidate, and the sweep that ends all it left behind.

When the judge runs as root, the candidate's code runs as an unprivileged user (confine.py). With one shared
account (`nobody`) for every candidate, nothing tells one judgement's processes and files from another's: a
process the candidate left behind where no PID namespace ends it (on CUDA, whose IPC handles do not open across
PID namespaces, or a judge without namespaces) could outlive its judgement and wait for the next candidate, and
concurrent candidates could signal or trace each other and read each other's files in /tmp.

So by default (`JudgeConfig.candidate_user == "fresh"`) each judgement leases a user id from a range no account
uses (`FIRST_UID` on), for itself alone: the lease is an exclusive lock on a file named for the id under the cache
folder of the machine's (`lock_folder`, released by the kernel if we die). At the judgement's end, `UidLease.release` kills every process that
id may signal (as that id: `kill(-1, SIGKILL)` until none is left; a root process is never one of them) and
removes what the id owns in the folders anyone may write (`/tmp`, `/var/tmp`, `/dev/shm`, POSIX message queues in
`/dev/mqueue`), its System V shared memory, message queues and semaphores and its kernel keyrings (which outlive
every process, in no folder: `remove_ipc_of`, `clear_keys_of`). Only then is the id free for another judgement, which so starts with nothing of anyone's.

What this does not protect against: files the candidate writes in a world-writable folder below one it does
not own are found only where that folder is itself world-writable (the sweep does not descend into others).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import pwd
import secrets
import shutil
import signal
import stat
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from cuda_agent.machine import cache_root
from cuda_agent.subproc import account, descendants

FRESH = "fresh"
"""`JudgeConfig.candidate_user`'s value for a user id of its own per judgement."""
FIRST_UID, UID_COUNT = 1_900_000_000, 65_536
"""The ids leased: far above any account's (the system's own end at 65,535), within what a uid may be."""
SHARED_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue")
SYSV_IPC = {"shm": ("shmid", "shmctl"), "msg": ("msqid", "msgctl"), "sem": ("semid", "semctl")}
"""System V IPC objects (`/proc/sysvipc/KIND`): the column of an object's id, and the call that removes one."""
IPC_RMID = 0
KEYCTL = {"x86_64": 250, "aarch64": 219}
"""The keyctl system call's number (no library of the C library's wraps it)."""
KEYCTL_CLEAR, KEYCTL_GET_PERSISTENT = 7, 22
KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING = -4, -5
SWEEP_S = 5.0
"""How long the sweep keeps killing (a fork bomb racing it) before it says it could not finish."""


def lock_folder() -> Path:
    """The machine's folder of id locks, the judge's alone (made so if missing): under /run where it may be made
    there (no other user may make it first: a candidate that made it would hold the locks), else in our cache.

    Raises:
        OSError: neither can be made, or the one found is not the judge's alone.
    """
    failures = []
    for folder in (Path("/run/cuda-agent-uids"), cache_root() / "uids"):
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            failures.append(f"{folder}: {exc.strerror}")
            continue
        info = folder.stat()
        if info.st_uid != os.geteuid() or info.st_mode & 0o077:
            raise OSError(f"{folder} is not the judge's alone (owner {info.st_uid}, mode {oct(info.st_mode & 0o777)})")
        return folder
    raise OSError(f"no folder for the candidates' id locks: {'; '.join(failures)}")


def leased(uid: int) -> bool:
    """Whether `uid` is one of the range's (leased per judgement), not an account's."""
    return FIRST_UID <= uid < FIRST_UID + UID_COUNT


@dataclass
class UidLease:
    """A user id held for one judgement (`claim`), swept and given back by `release`."""

    user: pwd.struct_passwd
    lock: int | None = field(repr=False)
    """The descriptor holding the id's lock file; None once released."""

    @classmethod
    def claim(cls, folder: Path | None = None) -> UidLease:
        """An id nobody else holds now, tried from a random place in the range; its lock in `folder` (default
        `lock_folder()`: one for the whole machine, so that judges with different caches never share an id).

        Raises:
            OSError: the lock folder cannot be made or is not root's alone, or every id is held.
        """
        folder = folder or lock_folder()
        start = secrets.randbelow(UID_COUNT)
        for k in range(UID_COUNT):
            lease = cls.take(folder, FIRST_UID + (start + k) % UID_COUNT)
            if lease is not None:
                return lease
        raise OSError(f"all {UID_COUNT} candidate user ids under {folder} are held")

    @classmethod
    def take(cls, folder: Path, uid: int) -> UidLease | None:
        """`uid`'s lease where nobody holds it (its lock file in `folder`), swept first; else None."""
        fd = os.open(folder / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        # A judge killed before its sweep leaves the id's processes and files: sweep before using it.
        lease = cls(account(uid), fd)
        lease.sweep()
        return lease

    def sweep(self) -> str | None:
        """Kill every process of the id and remove its files in the shared folders; why not all, or None."""
        killed = kill_all_of(self.user.pw_uid)
        for folder in SHARED_FOLDERS:
            remove_owned(Path(folder), self.user.pw_uid)
        remove_ipc_of(self.user.pw_uid)
        clear_keys_of(self.user.pw_uid)
        return None if killed else f"processes of uid {self.user.pw_uid} were still starting after {SWEEP_S:.0f} s"

    def release(self) -> str | None:
        """Sweep, then give the id back; why the sweep did not finish, or None. Safe to call twice."""
        if self.lock is None:
            return None
        why_not = self.sweep()
        if why_not is None:  # an id whose processes could not all be killed stays locked until we exit
            os.close(self.lock)
            self.lock = None
        return why_not


def as_user(uid: int, act: Callable[[], int]) -> int:
    """`act()` in a forked child that first drops to `uid` (so that only what `uid` may reach is in its reach); the
    child's exit code: act's, 2 where anything raised. `act` makes system calls only: this process may have had
    threads."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            code = act()
        except BaseException:
            os._exit(2)
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _signal_all(sig: int) -> int:
    """`kill(-1, sig)` as the caller: 1 where some process got it, 0 where there was none."""
    try:
        os.kill(-1, sig)  # every process of this id but this one
    except ProcessLookupError:
        return 0
    return 1


def kill_all_of(uid: int) -> bool:
    """SIGKILL every process `uid` may signal, as `uid`, until none is left alive; False if some still were after
    `SWEEP_S`. Each round's `kill(-1)` is made by a forked child that drops to `uid` (so no process of root or of
    another id is in its reach, and the kernel, not a listing we race with, finds the processes)."""
    deadline = time.monotonic() + SWEEP_S
    while True:
        code = as_user(uid, lambda: _signal_all(signal.SIGKILL))
        if code == 0 or (code == 1 and _only_zombies(uid)):
            return True
        if code != 1 or time.monotonic() > deadline:
            return False
        time.sleep(0.005)


def signal_all_of(uid: int, sig: int) -> None:
    """Send `sig` to every process `uid` may signal, as `uid` (a forked child drops to it: only the system can
    find them all, and no process of root or another id is in its reach); none at all is no error."""
    as_user(uid, lambda: _signal_all(sig))


FREEZE_WAIT_S = 5.0
"""How long `frozen` waits, after SIGSTOP, for every thread of the id to stop."""


@contextlib.contextmanager
def frozen(uid: int | None, spared: Collection[int] = ()) -> Iterator[int]:
    """Every process of `uid` stopped (SIGSTOP) while the block runs, then let go on (SIGCONT): what the grader
    measures of its own then shares the machine with nothing of the candidate's (a thread that spins between calls
    would make eager's time now slower, and so the candidate's speed-up larger). A thread inside a system call stops
    only when it returns from it, and the kernel's work for it goes on until then (seconds of `MADV_POPULATE_WRITE`
    on GiBs): the block starts once every thread has stopped, or after FREEZE_WAIT_S; it gets the number of threads
    still not stopped then. `uid` None (the candidate is unconfined: it runs as we do, and `kill(-1)` would reach
    ours): every process below this one (the grader) but those in `spared` (ours: the gauge's, eager now's) and those
    below them (`stopped_below`; orphans too where the grader reaps them, `adopt_orphans`: on the CPU, as the gauge
    starts)."""
    if uid is None:
        with stopped_below(os.getpid(), spared) as running:
            yield running
        return
    signal_all_of(uid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + FREEZE_WAIT_S
        while (running := running_threads(uid)) and time.monotonic() < deadline:
            time.sleep(0.005)
        yield running
    finally:
        signal_all_of(uid, signal.SIGCONT)


PR_SET_CHILD_SUBREAPER = 36


def adopt_orphans() -> None:
    """This process (the grader) becomes the reaper of the orphans below it: a process the candidate's starts and
    leaves (a new session, a double fork) is then still below the grader, where `stopped_below` finds it; left to the
    machine's init, it was outside every stop and could load the machine only while the gauge measured."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) refused")


def kill_below(root: int) -> int:
    """SIGKILL every process below `root`, all stopped at once first (`stop_until_still`: none forks past the kill,
    none runs again after it), then any that still shows alive; returns how many were killed. The grader's end, where
    the candidate is unconfined: with `adopt_orphans` from its start, what the candidate started is below it, and
    nothing of it outlives the judgement (round 14's g8 across judgements) or writes after the grader (round 16's u1:
    a process it left rewrote the result file the grader had written, before the pipeline read it)."""
    stopped: list[int] = []
    stop_until_still(lambda: [pid for pid, _ in descendants(root)], stopped, time.monotonic() + FREEZE_WAIT_S)
    deadline = time.monotonic() + FREEZE_WAIT_S
    while True:
        for pid in stopped:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        alive = {pid for pid, _ in descendants(root) if not _zombie(pid)} - set(stopped)
        if not alive or time.monotonic() > deadline:
            return len(stopped)
        stopped += sorted(alive)


def _zombie(pid: int) -> bool:
    try:
        return proc_status(pid).get("State", ["Z"])[0] in ("Z", "X")
    except OSError:
        return True  # gone


@contextlib.contextmanager
def stopped_below(root: int, spared: Collection[int] = ()) -> Iterator[int]:
    """SIGSTOP every process below `root` but those in `spared` and what is below them, until they are seen still
    (`stop_until_still`) or for FREEZE_WAIT_S (a thread in a system call stops as it returns); the block gets the
    threads still not stopped (0 once all were seen still). SIGCONT to each after the block."""
    stopped: list[int] = []

    def below() -> list[int]:
        keep = {*spared, *(pid for ours in spared for pid, _ in descendants(ours))}
        return [pid for pid, _ in descendants(root) if pid not in keep]

    try:
        still = stop_until_still(below, stopped, time.monotonic() + FREEZE_WAIT_S)
        yield 0 if still else threads_not_stopped(stopped)
    finally:
        for pid in reversed(stopped):  # the last stopped goes on first: none sees one stopped before it longer
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGCONT)


def stop_until_still(listing: Callable[[], list[int]], stopped: list[int], deadline: float) -> bool:
    """SIGSTOP each process `listing` gives (each goes into `stopped`), listed again at each look (a fork under way
    when its parent stopped shows in the next); True once a look finds none new and every thread stopped, with none
    switched since the look before: all were stopped at once (a scan of /proc is not atomic, and a process still
    running as its stop came could let another go on, SIGCONT, and stop itself between two reads). False at
    `deadline`."""
    before = None
    while time.monotonic() < deadline:
        new = [pid for pid in listing() if pid not in stopped]
        for pid in new:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)
        now = None if new else switches_if_stopped(stopped)
        if now is not None and now == before:
            return True
        before = now
        time.sleep(0 if now is not None else 0.001)  # a look to confirm at once; a thread still running: a moment
    return False


def proc_status(pid: int, tid: int | None = None) -> dict[str, list[str]]:
    """/proc's status of a process (or one of its threads), each field's words."""
    path = f"/proc/{pid}/status" if tid is None else f"/proc/{pid}/task/{tid}/status"
    with open(path) as status:
        return {key: value.split() for key, _, value in (line.partition(":") for line in status)}


def switches_if_stopped(pids: list[int]) -> dict[tuple[int, int], tuple[str, ...]] | None:
    """Each thread's context switches, where every thread of `pids` is stopped (or dead); else None."""
    seen = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            for task in os.scandir(f"/proc/{pid}/task"):
                with contextlib.suppress(OSError, KeyError):
                    fields = proc_status(pid, int(task.name))
                    if fields["State"][0] not in "TtZX":
                        return None
                    seen[pid, int(task.name)] = (
                        *fields["voluntary_ctxt_switches"],
                        *fields["nonvoluntary_ctxt_switches"],
                    )
    return seen


def threads_not_stopped(pids: list[int]) -> int:
    count = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for task in os.scandir(f"/proc/{pid}/task"):
                with contextlib.suppress(OSError):
                    state = Path(task.path, "stat").read_text().rsplit(")", 1)[1].split()[0]
                    count += state not in "TtZX"
    return count


def running_threads(uid: int) -> int:
    """Threads of `uid`'s processes that are neither stopped nor dead (running, in a system call or waiting in one)."""
    count = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError, KeyError):
            for task in os.scandir(Path(entry.path, "task")):
                fields = dict(line.split(":", 1) for line in Path(task.path, "status").read_text().splitlines())
                if int(fields["Uid"].split()[0]) == uid and fields["State"].strip()[:1] not in "TtZX":
                    count += 1
    return count


def _only_zombies(uid: int) -> bool:
    """Whether every process of `uid` is dead and waits for its parent to reap it."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            # status, not the folder's owner: a process that changed its user is not dumpable, and its /proc
            # folder is root's whatever it runs as.
            fields = dict(line.split(":", 1) for line in Path(entry.path, "status").read_text().splitlines())
            if int(fields["Uid"].split()[0]) == uid and not fields["State"].strip().startswith("Z"):
                return False
    return True


def remove_owned(folder: Path, uid: int) -> None:
    """Remove what `uid` owns in `folder`, looking further only into folders anyone may write (where it could
    have made something of its own); links are removed, never followed."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        with contextlib.suppress(OSError):
            info = entry.stat(follow_symlinks=False)
            if info.st_uid == uid:
                if stat.S_ISDIR(info.st_mode):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            elif stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_IWOTH:
                remove_owned(Path(entry.path), uid)


def clear_keys_of(uid: int) -> None:
    """Empty the kernel keyrings of `uid` (its user, user-session and persistent keyrings): they are kept per user id,
    in no folder, after its last process (a key added in one judgement was there for the next of that id). A forked
    child drops to `uid` to reach them (`as_user`)."""
    import ctypes

    number = KEYCTL.get(os.uname().machine)
    if number is None:
        return
    libc = ctypes.CDLL(None, use_errno=True)

    def clear() -> int:
        persistent = libc.syscall(number, KEYCTL_GET_PERSISTENT, -1, KEY_SPEC_USER_KEYRING)
        for keyring in (persistent, KEY_SPEC_USER_SESSION_KEYRING, KEY_SPEC_USER_KEYRING):
            if keyring != -1:
                libc.syscall(number, KEYCTL_CLEAR, keyring)
        return 0

    as_user(uid, clear)


def remove_ipc_of(uid: int) -> None:
    """Remove every System V shared memory segment, message queue and semaphore set that `uid` made or owns: they
    outlive their processes (a segment stays until removed, readable by whomever its mode lets), so a candidate
    could leave one for a later candidate of the machine. Segments still attached go once their last process does."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for kind, (column, remove) in SYSV_IPC.items():
        with contextlib.suppress(OSError, ValueError):
            header, *rows = Path("/proc/sysvipc", kind).read_text().splitlines()
            for row in rows:
                fields = dict(zip(header.split(), row.split(), strict=False))
                if uid in (int(fields["uid"]), int(fields["cuid"])):
                    ident = int(fields[column])
                    if kind == "sem":
                        libc.semctl(ident, 0, IPC_RMID)
                    else:
                        getattr(libc, remove)(ident, IPC_RMID, None)
