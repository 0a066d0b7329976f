"""A judge child started ahead of its work, and watched for progress while it works.

Starting Python and importing torch costs seconds (8.5 s of a 13.5 s run stage on the H200), and a
candidate must still get a fresh process of its own. So the grader starts the candidate's process
before it is needed (`Standby(...)`): it imports torch and the judge, then waits for one request
on stdin. When the GPU turn is ours, `go` hands it the request, the folder and the confinement,
and the process is used for that one candidate only, then ends.

While it works, the child writes a byte to a progress pipe after every step (a call of the
candidate or the reference, a comparison, a timed repetition). `wait` kills it when a step takes
longer than `step_s` (a hang: C++ spinning with the GIL held is caught within that time) or the
whole run longer than `total_s`; a slow but working candidate keeps ticking and finishes.

Confinement: the process is started in a PID and mount namespace of its own (jail.py, where it will
confine), as us; on `go` it hides the caches, mounts the candidate's private build copy, enters the
candidate's folder and drops to the candidate's user before it reads the request, exactly as a child
started confined would. Closing it kills its process group, and with it the namespace's PID 1: whatever
the candidate started dies too.

The child dies with the grader (subproc.die_with_parent, set again after the change of user): a grader
killed mid-run leaves no candidate spinning on its own. The thread that starts a standby is the one that
reaps it, within one judgement, so the signal never fires early.

A standby may be started ahead of a judgement not known yet (a spare: sandbox/spare.py keeps one per timing
slot of a long-lived pool). Its start-time environment and namespace are all it has taken from anyone
(`StandbySpec`): the request, the folder, the confinement and the candidate's settings come on `go`. So a
spare serves a judgement exactly when that judgement would have started its own standby with the same
spec, and is alive (`unfit_for`); otherwise it is closed and a fresh one started.

What this does not protect against: a candidate that writes to the progress pipe itself (it runs
in the same process) extends its own life up to `total_s`, the cap it had anyway; one that keeps a program named
`ninja` running (its own load_inline in forward, or a process of its own where the static policy is off) goes on
past its limits by up to `BUILD_GRACE_S`, holding its slot, not changing its verdict. Unconfined (not root),
processes the candidate started itself and moved out of its process group outlive it.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from cuda_agent.errors import ProtocolError
from cuda_agent.jail import bind_mounts, private_folders
from cuda_agent.judge.protocol import StandbyOrder
from cuda_agent.machine import CACHE_ENV, cache_root
from cuda_agent.subproc import (
    Ahead,
    ChildResult,
    Confinement,
    account,
    child_env,
    descendants,
    die_with_parent,
    drop_privileges,
    interpreter_paths,
    kill_group,
    ninja_dry_run,
    read_order,
)

PROGRESS_FD_ENV = "CUDA_AGENT_PROGRESS_FD"
"""The child finds its progress pipe's file descriptor in this variable."""
TURNS_ENV = "CUDA_AGENT_GPU_TURNS"
"""The lock folder of the GPU a standby will run on (its CUDA set-up takes a shared turn there)."""
READY = b"R"
WAITING = b"W"
"""Written, with the child's clock, when its set-up starts waiting for a GPU turn; WAITED when the wait ends."""
WAITED = b"D"
TICK = b"."
SPARE = "spare started ahead"
"""A judgement's env.standby_worker when its candidate's process was a spare (`take_spare`)."""
CANDIDATE = b"C"
"""Written once, just before the candidate's code first runs. A child that dies or hangs without having
written it failed in our code (set-up, loading the reference): our failure. The candidate can add this
byte itself, never take it back, so it cannot pass its own crash off as ours."""

BUILD_TOOL = "ninja"
BUILD_GRACE_S = 600.0
"""Longest a run may go on past its step and total limits while torch's extension build (`ninja`) runs in its
process group. The build stage builds what the candidate's import loads, so that load normally compiles nothing;
where it does all the same (a build folder another process touched, an environment that differs, a candidate
whose load_inline arguments change from one import to the next), the compile is no hang of the candidate's: CI
saw correct kernels killed as `timeout` after 30 s inside torch's `_run_ninja_build` on a loaded 2-core machine.
The time stays bounded (the build stage's own limit), and `build_grace_s` reports it."""


def _why_building(pid: int) -> str:
    """Why the ninja `pid` has work, as a dry run in its folder explains it (the first reasons), or why unknown."""
    try:
        folder = os.readlink(f"/proc/{pid}/cwd")
        # As it sees its folder: a confined child's private copy is mounted where only it sees it.
        _, reasons = ninja_dry_run(folder, timeout_s=10, mounts_of=pid if os.geteuid() == 0 else None)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc})"
    return f"{folder}: {'; '.join(reasons[:3]) or 'no reason given'}"


def _clock(line: bytes) -> float:
    """The clock of a set-up line (a kind byte, then `time.monotonic()`): only our set-up code writes them, before
    any candidate code, so one that is not is ours to raise.

    Raises:
        ProtocolError: the line holds no clock.
    """
    try:
        return float(line[1:])
    except ValueError:
        raise ProtocolError(f"the judge's worker said {line[:40]!r} during its set-up: no kind and clock") from None


@dataclass(frozen=True)
class StandbySpec:
    """What a standby is started with: everything it holds before its request. Two standbys with equal specs
    are interchangeable: the environment carries the device (CUDA_VISIBLE_DEVICES, the CPU thread counts), the
    GPU-turn folder (TURNS_ENV), the import path (PYTHONPATH) and the caches; `namespace` the confinement."""

    module: str
    env: tuple[tuple[str, str], ...]
    """The child's environment, sorted by name (the candidate's settings are added on `go`)."""
    namespace: bool = False

    @classmethod
    def of(cls, module: str, env: dict[str, str], namespace: bool = False) -> StandbySpec:
        return cls(module, tuple(sorted(env.items())), namespace)

    def differences(self, other: StandbySpec) -> list[str]:
        """What differs from `other`, by name (variables' values are left out: they may be long or private)."""
        names = sorted({k for k, _ in set(self.env) ^ set(other.env)})
        fields = [f for f in ("module", "namespace") if getattr(self, f) != getattr(other, f)]
        return fields + [f"env {name}" for name in names]


class Standby(Ahead):
    """One child process of `python -P -m MODULE --standby`, started now (`subproc.Ahead`) and used once by `go`."""

    def __init__(
        self,
        module: str,
        env: dict[str, str],
        namespace: bool = False,
        channel: tuple[str, int] | None = None,
        pid_namespace: bool = True,
    ) -> None:
        """
        Args:
            module: the child's module; its main() understands `--standby` (see `serve_once`).
            env: the child's environment (the candidate's settings are added on `go`).
            namespace: start it confined (jail.py: a PID and mount namespace of its own, our interpreter
                reachable) but as root, so that `go` can mount a confinement's folders and drop to its user.
            channel: (variable, descriptor): a descriptor the child keeps, named to it in that variable (the
                grader's socket to the candidate's process).
            pid_namespace: with `namespace`, a PID namespace too (False where the child shares CUDA IPC handles with
                its starter: legacy CUDA IPC fails across PID namespaces; it then dies with its process group).
        """
        self.spec = StandbySpec.of(module, env, namespace)
        """What it was started with: a spare serves only a judgement that would start one the same (`unfit_for`)."""
        self._folder = tempfile.TemporaryDirectory(prefix="cuda-agent-standby-")
        folder = Path(self._folder.name)
        self._out: IO[bytes] = open(folder / "stdout", "w+b")  # noqa: SIM115 (closed in close())
        self._err: IO[bytes] = open(folder / "stderr", "w+b")  # noqa: SIM115
        self._progress_r, progress_w = os.pipe()
        self.started = time.monotonic()
        self.went: float | None = None
        env = {**env, PROGRESS_FD_ENV: str(progress_w), "TMPDIR": str(folder), "HOME": str(folder)}
        kept = (progress_w,)
        if channel is not None:
            env[channel[0]] = str(channel[1])
            kept += (channel[1],)
        try:
            super().__init__(
                [sys.executable, "-P", "-m", module, "--standby"],
                # The judgement's cache reachable (it may lie under a closed folder, /root): its request hides it
                # but for the fast-build objects, which it must find first. Named by the environment: the
                # grader's own HOME is its standby folder, so the default from HOME would be the wrong one.
                Confinement(
                    reach=(*interpreter_paths(), env.get(CACHE_ENV) or str(cache_root())),
                    pid_namespace=pid_namespace,
                    # Where CUDA IPC crosses (no PID namespace), as before: not yet run on a GPU in one of its own.
                    network_namespace=pid_namespace,
                )
                if namespace
                else None,
                folder,
                env=env,
                stdout=self._out,
                stderr=self._err,
                pass_fds=kept,
            )
        finally:
            os.close(progress_w)
        self.ready_s: float | None = None
        """Seconds from start to ready (imports and set-up done), once seen."""
        self.turn_wait_s = 0.0
        """Seconds of its set-up spent waiting for a GPU turn (not counted in its start-up limit)."""
        self._waiting_since: float | None = None
        self._set_up_said = b""
        self.candidate_started = False
        """The child said (CANDIDATE) that the candidate's code was about to run."""
        self.last_step_s = 0.0
        """Seconds from the last progress byte to the end, once wait() returned (a hang's whole step)."""
        self.build_grace_s = 0.0
        """Seconds the run was let go on past its limits while a build ran in it (`BUILD_GRACE_S`)."""
        self.build_why = ""
        """What ninja said, when the build was first seen, of why it had work to do."""
        self._building = False

    @classmethod
    def start(cls, spec: StandbySpec) -> Standby:
        return cls(spec.module, dict(spec.env), namespace=spec.namespace)

    def unfit_for(self, spec: StandbySpec) -> str | None:
        """Why this standby, started ahead, may not serve a judgement that would start one with `spec`; None: it
        may. One that has died, been used or closed serves no one."""
        if self.handed or self._progress_r < 0:
            return "it was used or closed already"
        if self.proc.poll() is not None:
            return f"it had exited ({self.proc.returncode})"
        differences = self.spec.differences(spec)
        return f"it was started otherwise: {', '.join(differences)}" if differences else None

    def wait_ready(self, timeout_s: float) -> str | None:
        """Block until the child has finished its set-up; None, or why it never got ready (it is then killed).

        The limit counts the child's set-up from its start, less the time it waited for a GPU turn (another
        process's timing may hold the GPU for minutes). What the child already said is read before the limit is
        checked, so a child that got ready while we built is ready however long the build took.
        """
        while self.ready_s is None:
            now = time.monotonic()
            left = self.started + timeout_s + self._turn_wait_until(now) - now
            # Never a blocking look past the limit, and a fresh look at the limit each second while it waits for a turn.
            readable, _, _ = select.select([self._progress_r], [], [], min(max(left, 0.0), 1.0))
            if not readable:
                if left <= 0:
                    self.close()
                    return f"the judge's worker was not ready after {timeout_s:.0f} s of set-up"
                continue
            data = os.read(self._progress_r, 256)
            if not data:
                code = self.proc.wait()
                tail = " ".join(self._tail(self._err, 800).strip().splitlines()[-4:])
                self.close()
                return f"the judge's worker exited ({code}) before it was ready: {tail or 'no output'}"
            self._hear_set_up(data)
        return None

    def _hear_set_up(self, data: bytes) -> None:
        """Take in what the child said during its set-up: lines of a kind byte and its monotonic clock (one clock
        for the whole machine), so figures are when things happened, not when we read them (maybe after our build)."""
        self._set_up_said += data
        while b"\n" in self._set_up_said and self.ready_s is None:
            line, self._set_up_said = self._set_up_said.split(b"\n", 1)
            kind, at = line[:1], _clock(line)
            if kind == WAITING:
                self._waiting_since = at
            elif kind == WAITED and self._waiting_since is not None:
                self.turn_wait_s += at - self._waiting_since
                self._waiting_since = None
            elif kind == READY:
                self.ready_s = at - self.started

    def _turn_wait_until(self, now: float) -> float:
        """Seconds its set-up has waited for GPU turns, up to `now`."""
        return self.turn_wait_s + (now - self._waiting_since if self._waiting_since is not None else 0.0)

    def go(self, args: list[str], cwd: Path, env: dict[str, str], confine: Confinement | None) -> None:
        """Hand the child its one request: arguments of its main(), folder, environment and confinement."""
        order = StandbyOrder(
            args=args,
            cwd=str(cwd),
            env=env,
            binds=list(confine.binds) if confine else [],
            hidden=list(confine.hidden) if confine else [],
            shown=list(confine.shown) if confine else [],
            user=confine.user.pw_uid if confine and confine.user else None,
        )
        self.went = time.monotonic()
        self.hand(order)  # one that died meanwhile: wait() reports how it ended

    def wait(
        self, step_s: float, total_s: float, grace_s: float = 2.0, output_cap: int = 200_000
    ) -> tuple[ChildResult, str]:
        """Wait for the child to exit; (how it ended, which limit killed it: 'step', 'total' or '').

        Args:
            step_s: longest a step may take (from go, or from the last progress byte).
            total_s: longest the whole run may take, from go.
        """
        went = self.went or time.monotonic()
        last = went
        held_until = 0.0  # while a build runs in the child, past its limits (`_held_off`)
        killed_by = ""
        while True:
            now = time.monotonic()
            deadline = max(min(last + step_s, went + total_s), held_until)
            if now >= deadline:
                if self.proc.poll() is not None:  # one that ended while we were not looking ended in time
                    break
                held_until = self._held_off(now, step_s) or 0.0
                if held_until:
                    continue
                killed_by = "total" if went + total_s <= last + step_s else "step"
                break
            # Also look at the child itself now and then: a process it left behind may keep the pipe open.
            readable, _, _ = select.select([self._progress_r], [], [], min(deadline - now, 0.5))
            if not readable:
                if self.proc.poll() is not None:
                    break
                continue
            data = os.read(self._progress_r, 4096)
            if not data:
                break  # every holder of the pipe has exited
            self.candidate_started = self.candidate_started or CANDIDATE in data
            last = time.monotonic()
        if killed_by:
            # SIGTERM first: the worker dumps its stacks on it (faulthandler), so a hang can be located.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        kill_group(self.proc.pid)
        code = self.proc.wait()
        # What it wrote but we had not read yet (it wrote, then exited or hung, while our look had already timed
        # out): without this, a candidate that ran and then crashed or hung would read as our failure.
        self._hear_rest()
        result = ChildResult(
            returncode=None if killed_by else code,
            stdout=self._tail(self._out, output_cap),
            stderr=self._tail(self._err, output_cap),
            timed_out=bool(killed_by),
            wall_s=time.monotonic() - went,
        )
        # The last step: from its last progress byte to the end (the whole of a hang's step, kill included).
        self.last_step_s = time.monotonic() - last
        self.close()
        return result, killed_by

    def _held_off(self, now: float, step_s: float) -> float | None:
        """At a limit: until when it is held off because a build runs in the child's group (a second, then look
        again, up to BUILD_GRACE_S in all) or has just ended (a step of its own for what follows it); None: it stands."""
        builds = [pid for pid, name in descendants(self.proc.pid) if name == BUILD_TOOL]
        if builds and self.build_grace_s < BUILD_GRACE_S:
            if not self.build_grace_s:
                self.build_why = _why_building(builds[0])
            self._building = True
            self.build_grace_s += 1.0
            return now + 1.0
        if self._building:
            self._building = False
            return now + step_s
        return None

    def _hear_rest(self) -> None:
        """Read what is left in the progress pipe without blocking (a process it left may hold the pipe open)."""
        os.set_blocking(self._progress_r, False)
        with contextlib.suppress(BlockingIOError):
            while data := os.read(self._progress_r, 4096):
                self.candidate_started = self.candidate_started or CANDIDATE in data

    def close(self) -> None:
        """Kill the child (and descendants it left) and remove its files (safe to call twice)."""
        self.end()
        if self._progress_r >= 0:
            os.close(self._progress_r)
            self._progress_r = -1
        for handle in (self._out, self._err):
            handle.close()
        self._folder.cleanup()

    def stderr_tail(self, cap: int) -> str:
        """The last `cap` characters the child wrote to stderr (its stacks, where it was killed)."""
        return self._tail(self._err, cap)

    @staticmethod
    def _tail(handle: IO[bytes], cap: int) -> str:
        if handle.closed:
            return ""
        handle.flush()
        size = handle.seek(0, os.SEEK_END)
        handle.seek(max(0, size - 4 * cap))  # a child may have written gigabytes: read only the tail
        return handle.read().decode(errors="replace")[-cap:]


SHIM_NAMESPACE_ENV = "CUDA_AGENT_SHIM_NAMESPACE"
"""Set for a grader whose candidate's process must start confined (jail.py), to confine itself on its request."""


def worker_spec(
    device: str, cpu_threads: int, turns_folder: Path | None, namespace: bool, cache_dir: Path
) -> StandbySpec:
    """How a judgement starts its run stage's grader (child/grader.py), which starts the candidate's process: our
    environment with the judgement's cache (the candidate's process, confined, must reach it to be shown its
    fast-build objects), confined to the CPU (`cpu_threads` threads) or told its GPU's turn folder; `namespace`:
    the candidate's process starts confined. The grader itself is never confined: it is ours."""
    env = child_env({CACHE_ENV: str(cache_dir)})
    # Triton's interpreter runs a Triton solution's kernels on the CPU (child/triton_launch.py); set from the start,
    # because the candidate's process imports triton (through torch's profiler) before it knows its solution.
    env.pop("TRITON_INTERPRET", None)
    if device != "cuda":
        env["CUDA_VISIBLE_DEVICES"] = ""
        env.update(OMP_NUM_THREADS=str(cpu_threads), MKL_NUM_THREADS=str(cpu_threads), TRITON_INTERPRET="1")
    elif turns_folder is not None:
        env[TURNS_ENV] = str(turns_folder)
    if namespace:
        env[SHIM_NAMESPACE_ENV] = "1"
    return StandbySpec.of("cuda_agent.judge.child.grader", env)


def take_spare(spare: Standby | None, spec: StandbySpec) -> tuple[Standby, str, str | None]:
    """The standby for a judgement that would start one with `spec`: `spare` where it lives and was started so,
    else a new one (the spare closed); (the standby, how it came to be (SPARE or 'started ahead'), why the spare
    was not used, if one was offered)."""
    why_not = spare.unfit_for(spec) if spare is not None else None
    if spare is not None and why_not is None:
        return spare, SPARE, None
    if spare is not None:
        spare.close()
    return Standby.start(spec), "started ahead", why_not


# The child's side.


def progress() -> Callable[[], None]:
    """A function that reports one finished step to the grader (nothing when no pipe was given)."""
    fd = int(os.environ.get(PROGRESS_FD_ENV, "-1"))
    if fd < 0:
        return lambda: None

    def tick() -> None:
        with contextlib.suppress(OSError):
            os.write(fd, TICK)

    return tick


def mark_candidate() -> None:
    """Tell the grader that the candidate's code runs next (CANDIDATE; nothing when no pipe was given)."""
    fd = int(os.environ.get(PROGRESS_FD_ENV, "-1"))
    if fd >= 0:
        with contextlib.suppress(OSError):
            os.write(fd, CANDIDATE)


def _say(kind: bytes) -> None:
    """Tell the grader a set-up event (`kind`) with this machine's monotonic clock (nothing when no pipe was given)."""
    fd = int(os.environ.get(PROGRESS_FD_ENV, "-1"))
    if fd >= 0:
        os.write(fd, kind + f"{time.monotonic():.6f}\n".encode())


def set_up_turn() -> contextlib.AbstractContextManager:
    """In the child: a shared turn on its GPU (TURNS_ENV's lock folder) for CUDA's set-up, whose wait the grader
    leaves out of the start-up limit (WAITING, WAITED); no turn where no folder was given."""
    folder = os.environ.get(TURNS_ENV)
    if not folder:
        return contextlib.nullcontext()
    from cuda_agent.gpu_turns import GpuTurns

    return GpuTurns(folder, on_wait=lambda waiting: _say(WAITING if waiting else WAITED)).shared()


def await_request(warm_up: Callable[[], None]) -> StandbyOrder:
    """In the child: warm up, say ready and read the one request (`go`'s message), taking its environment.

    Raises:
        SystemExit: stdin closed without a request (the grader discarded this standby).
        ProtocolError: the request is no StandbyOrder.
    """
    warm_up()
    _say(READY)
    order = read_order(StandbyOrder)
    if order is None:
        raise SystemExit(0)
    os.environ.update(order.env)
    tempfile.tempdir = None  # picked from TMPDIR again: the request's folder, not the standby's
    return order


def serve_once(warm_up: Callable[[], None]) -> list[str]:
    """In the child: `await_request`, then confine as the request says (mounts in the namespace it was started in,
    its folder, its user) and return main()'s arguments."""
    parent = os.getppid()  # it dies with its starter (subproc.die_with_parent): here is who that is
    order = await_request(warm_up)
    if order.user is not None:  # the candidate's: the machine's shared folders are not (jail.private_folders)
        writable = [order.cwd, *(path for pair in order.binds for path in pair)]
        private_folders([*interpreter_paths(), *order.hidden, *order.shown], writable)
    bind_mounts(order.binds, order.hidden, order.shown)  # in the namespace it was started in
    os.chdir(order.cwd)
    if order.user is not None:
        drop_privileges(account(order.user))
        die_with_parent(parent)  # again: the change of user cleared it
    return order.args
