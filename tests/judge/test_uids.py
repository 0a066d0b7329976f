"""A user id of its own per judgement (judge/uids.py): held by one judgement at a time, and swept at its end."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from cuda_agent.judge.uids import UidLease, kill_all_of, leased, lock_folder, remove_owned

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: only root can act as another user id")


def _as(uid: int, argv: list[str], **kwargs) -> subprocess.Popen:
    """`argv` as `uid`, in a session of its own (out of our process group, as a daemon would be)."""

    def drop() -> None:
        os.setsid()
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)

    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    return subprocess.Popen(argv, preexec_fn=drop, **(quiet | kwargs))


def _alive(proc: subprocess.Popen, wait_s: float = 2.0) -> bool:
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        return True
    return False


def test_two_judgements_never_hold_one_id_and_a_released_id_is_free_again() -> None:
    first, second = UidLease.claim(), UidLease.claim()
    try:
        assert first.user.pw_uid != second.user.pw_uid
        assert leased(first.user.pw_uid) and leased(second.user.pw_uid)
        assert first.user.pw_gid == first.user.pw_uid  # no account, no group of anyone's
    finally:
        assert first.release() is None and second.release() is None
    assert first.release() is None  # twice is safe
    # A released id's lock is free: it can be taken again at once.
    import fcntl

    fd = os.open(lock_folder() / f"{first.user.pw_uid}.lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.close(fd)


def test_the_sweep_ends_the_ids_processes_and_files_and_nothing_of_anyone_else() -> None:
    lease = UidLease.claim()
    uid = lease.user.pw_uid
    ours = subprocess.Popen(["sleep", "60"], start_new_session=True)
    other = _as(uid + 1 if leased(uid + 1) else uid - 1, ["sleep", "60"])
    # A daemon of the id that forks again and again: what the kernel finds is killed, wherever it went.
    daemons = [_as(uid, ["sleep", "60"]), _as(uid, ["sh", "-c", "while :; do sleep 0.01 & done"])]
    with tempfile.TemporaryDirectory(dir="/tmp") as shared:
        Path(shared).chmod(0o1777)  # anyone may write here, as in /tmp itself
        left = [Path("/tmp", f"cuda-agent-uids-test-{uid}"), Path(shared, "nested"), Path("/dev/shm", f"t-{uid}")]
        for path in left:
            path.write_text("left behind")
            os.chown(path, uid, uid)
        kept = Path(shared, "root's")
        kept.write_text("ours")
        try:
            assert lease.release() is None
            assert not any(_alive(d, 5.0) for d in daemons)
            assert _alive(ours, 0.2) and _alive(other, 0.2)  # root's and another id's are out of its reach
            assert not any(path.exists() for path in left) and kept.exists()
        finally:
            for proc in (ours, other, *daemons):
                proc.kill()
                proc.wait()


def test_a_killed_judges_leftovers_are_swept_before_its_id_is_used_again() -> None:
    """A judge that died before its sweep released its lock (the kernel did) but left the id's processes: the next
    claim of that id sweeps first."""
    lease = UidLease.claim()
    uid = lease.user.pw_uid
    daemon = _as(uid, ["sleep", "60"])
    try:
        os.close(lease.lock)  # as a killed judge's would be
        lease.lock = None
        again = UidLease.take(lock_folder(), uid)
        assert again is not None and not _alive(daemon, 5.0)
        again.release()
    finally:
        daemon.send_signal(signal.SIGKILL)
        daemon.wait()


def test_kill_all_of_an_id_with_no_process_returns_at_once() -> None:
    start = time.monotonic()
    assert kill_all_of(1_900_065_000)
    assert time.monotonic() - start < 1.0


def test_remove_owned_follows_no_link(tmp_path: Path) -> None:
    """A link the candidate left towards a folder of ours is removed; what it points to stays."""
    with tempfile.TemporaryDirectory(dir="/tmp") as shared:
        Path(shared).chmod(0o1777)
        target = tmp_path / "ours"
        target.mkdir()
        (target / "keep").write_text("ours")
        link = Path(shared, "link")
        link.symlink_to(target)
        os.chown(link, 1_900_065_001, 1_900_065_001, follow_symlinks=False)
        remove_owned(Path(shared), 1_900_065_001)
        assert not link.is_symlink() and (target / "keep").exists()


def test_the_machine_has_one_lock_folder_and_only_root_may_write_it() -> None:
    """Judges with different caches share the machine's ids: their locks must be in one place nobody else owns."""
    folder = lock_folder()
    assert folder == lock_folder() and folder.stat().st_uid == 0 and not folder.stat().st_mode & 0o077


def test_frozen_stops_every_process_of_the_id_and_lets_them_go_on_after() -> None:
    """While the grader times eager again, nothing of the candidate's may run beside it."""
    from cuda_agent.judge.uids import frozen

    lease = UidLease.claim()
    uid = lease.user.pw_uid
    daemon = _as(uid, ["sleep", "60"])
    ours = subprocess.Popen(["sleep", "60"], start_new_session=True)

    def state(proc: subprocess.Popen) -> str:
        return Path(f"/proc/{proc.pid}/stat").read_text().rpartition(")")[2].split()[0]

    try:
        time.sleep(0.1)
        with frozen(uid):
            assert state(daemon) == "T" and state(ours) != "T"
        assert state(daemon) != "T"
        with frozen(None):  # an unconfined candidate runs as we do: every process below ours stops
            assert state(ours) == "T"
        assert state(ours) != "T"
        with frozen(None, spared=(ours.pid,)):  # but those spared (ours: the gauge's, eager now's)
            assert state(ours) != "T"
    finally:
        assert lease.release() is None
        ours.kill()
        ours.wait()
        daemon.wait()


POPULATE_SCRIPT = """
import mmap, threading
def populate():
    memory = mmap.mmap(-1, 1 << 30)
    memory.madvise(14)  # MADV_NOHUGEPAGE: a fault for every 4 KiB
    print("populating", flush=True)
    memory.madvise(23)  # MADV_POPULATE_WRITE: about a second in the kernel, which SIGSTOP does not interrupt
thread = threading.Thread(target=populate)
thread.start()
thread.join()
"""


@pytest.mark.slow
def test_frozen_waits_for_a_thread_the_kernel_works_for_through_sigstop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 13's b6: a thread inside MADV_POPULATE_WRITE runs on in the kernel after its process got SIGSTOP; eager
    timed beside it would read slower and the candidate faster. The block starts once it has stopped."""
    from cuda_agent.judge import uids

    lease = UidLease.claim()
    uid = lease.user.pw_uid
    worker = _as(
        uid, ["/usr/bin/python3", "-c", POPULATE_SCRIPT], stdout=subprocess.PIPE
    )  # the venv may be closed to it
    try:
        assert worker.stdout is not None and worker.stdout.readline().strip() == b"populating"
        monkeypatch.setattr(uids, "FREEZE_WAIT_S", 0.02)
        with uids.frozen(uid) as running:
            assert running >= 1  # stopped, but its thread still in the kernel
        monkeypatch.setattr(uids, "FREEZE_WAIT_S", 30.0)
        with uids.frozen(uid) as running:
            assert running == 0 and uids.running_threads(uid) == 0
    finally:
        assert lease.release() is None
        worker.wait()


SHM_SCRIPT = """
import ctypes
libc = ctypes.CDLL(None)
libc.shmat.restype = ctypes.c_void_p
ident = libc.shmget(0, 4096, 0o1666)  # IPC_PRIVATE, IPC_CREAT | 0666: anyone's to read, kept after we exit
ctypes.memmove(libc.shmat(ident, None, 0), b"left for the next candidate", 27)
print(ident)
"""


def _segments() -> dict[int, int]:
    """System V shared memory segments of the machine: id -> creator's uid."""
    header, *rows = Path("/proc/sysvipc/shm").read_text().splitlines()
    fields = [dict(zip(header.split(), row.split(), strict=False)) for row in rows]
    return {int(f["shmid"]): int(f["cuid"]) for f in fields}


def test_the_sweep_removes_the_ids_system_v_shared_memory_and_nothing_of_anyone_else() -> None:
    # A segment outlives the process that made it, in no folder: without the sweep it waits for a later candidate.
    lease = UidLease.claim()
    uid = lease.user.pw_uid
    maker = _as(uid, ["python3", "-c", SHM_SCRIPT], stdout=subprocess.PIPE, text=True)
    theirs = int(maker.communicate(timeout=30)[0])
    ours = subprocess.run(["python3", "-c", SHM_SCRIPT], capture_output=True, text=True, check=True)
    mine = int(ours.stdout)
    try:
        assert _segments()[theirs] == uid  # outlived its process
        assert lease.release() is None
        assert theirs not in _segments() and mine in _segments()
    finally:
        subprocess.run(["ipcrm", "-m", str(mine)], check=False)


KEY_SCRIPT = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
if sys.argv[1] == "add":  # add_key("user", name, payload, the user keyring)
    print(libc.syscall(248, b"user", b"cuda-agent-test-note", b"left", 4, -4))
else:  # keyctl(KEYCTL_SEARCH, the user keyring, "user", name, 0)
    print(libc.syscall(250, 10, -4, b"user", b"cuda-agent-test-note", 0))
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the system call numbers are x86-64's")
def test_the_sweep_empties_the_ids_keyrings() -> None:
    # A key outlives its process, in no folder, kept by the kernel per user id: without the sweep a candidate's note
    # waits for the next judgement of that id (round 12, t10).
    lease = UidLease.claim()
    uid = lease.user.pw_uid

    def run(what: str) -> int:
        proc = _as(uid, ["python3", "-c", KEY_SCRIPT, what], stdout=subprocess.PIPE, text=True)
        return int(proc.communicate(timeout=30)[0])

    key = run("add")
    assert key > 0 and run("search") == key  # outlived its process
    assert lease.release() is None
    assert run("search") == -1
