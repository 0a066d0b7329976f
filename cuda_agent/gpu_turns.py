"""Turns on a shared GPU: many processes may run kernels side by side, one at a time may have it alone.

Every process that runs kernels on a GPU for us (a judge's candidate and baseline processes, the
`cuda-agent judge` CLI, the sandbox pool's slots, bench, synth's filter workers, the workspace tools)
takes its turn here, whichever program started it, so that
- a timing never runs beside another process's kernels: on the H200 with 12 synth workers, one row's
  eager time read 0.84 ms in one audit and 4.2 ms in the next, and 11% of rows changed their
  time-window verdict;
- two judgements never hold their working sets at once: two `cuda-agent judge` processes at KernelBench
  L1/19 sizes (6.4 GB tensors) each held ~69 GB and both died of out-of-memory in the judge's own code.

The lock is a readers-writer lock between processes, built from two `flock`s on files in one folder
per physical GPU (`turns_for`): `cache_dir/gpu-turns/<GPU UUID>/`. A writer first closes the gate,
so no new reader starts, then waits for the readers in progress; readers pass the gate only for a
moment. The OS releases a dead process's locks, so a killed holder never blocks the GPU.

Who may touch the files: `flock` needs only a file open for reading, so the files are opened read-only,
and a judge that runs as an unprivileged user takes its turns in a folder that root made (the sandbox's
workspace commands run the judge as its user against root's cache). The folders are made 0755 and the
files 0644 whatever the umask, so no other user can delete or replace a lock file (a replaced file is a
second lock: two timings at once). A confined candidate (judge/confine.py) does not see the folder at
all: its mount namespace has an empty folder in its place, so it can neither take nor hold a turn.

Who takes which turn: the judge holds an exclusive turn for the whole life of a candidate process
on the GPU (correctness included: its working set is several times the task's outputs, and a
correctness stage is short next to the cost of a lost verdict); a baseline process takes its own turns, a
shared one to set up and build (torch.compile: tens of seconds of CPU) with its inputs freed at the end (built
again in the exclusive turn if memory ran out beside others), and an exclusive one to time; synth's workers
run their small models in shared turns and time in exclusive ones.

What this does not protect against: a process that runs kernels without asking for a turn (another
program, or code that ignores these files); memory that a process keeps allocated between its turns
(synth workers keep their caching allocator's blocks); a holder that opens the lock files itself
and unlocks them (so the judge, not the candidate's process, holds a candidate's turn); code of a user
who may read the folder and is not confined by the judge (a workspace command of the sandbox's user)
holding a turn for as long as that code lives (the sandbox kills it at its time limit).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from cuda_agent.machine import gpu_uuids


class GpuTurns:
    """A readers-writer lock over the files `gate` and `gpu` in `folder` (shared by the users of one GPU)."""

    def __init__(self, folder: str | Path, on_wait: Callable[[bool], None] | None = None) -> None:
        self.folder = Path(folder)
        self.gate = self.folder / "gate"
        self.gpu = self.folder / "gpu"
        self.waited_s = 0.0
        """Time spent waiting for turns, so a slow run can tell waiting from working."""
        self.held_s = 0.0
        """Time spent holding exclusive turns (the GPU-seconds a judgement cost the others)."""
        self.on_wait = on_wait
        """Called with True when a wait starts and False when it ends: one worker's long run makes the others
        wait, and their time limits should not count that (synth/pool.py)."""

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """Run kernels beside other processes' shared turns, never during an exclusive one."""
        with self._waiting():
            with self._locked(self.gate, fcntl.LOCK_EX):
                gpu = self._acquire(self.gpu, fcntl.LOCK_SH)
        try:
            yield
        finally:
            os.close(gpu)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Have the GPU alone: new turns wait at the gate, shared turns in progress finish first."""
        with self._waiting():
            gate = self._acquire(self.gate, fcntl.LOCK_EX)
            try:
                gpu = self._acquire(self.gpu, fcntl.LOCK_EX)
            except BaseException:
                os.close(gate)
                raise
        start = time.perf_counter()
        try:
            yield
        finally:
            os.close(gpu)
            os.close(gate)
            self.held_s += time.perf_counter() - start

    @contextlib.contextmanager
    def _waiting(self) -> Iterator[None]:
        start = time.perf_counter()
        if self.on_wait is not None:
            self.on_wait(True)
        try:
            yield
        finally:
            self.waited_s += time.perf_counter() - start
            if self.on_wait is not None:
                self.on_wait(False)

    @contextlib.contextmanager
    def _locked(self, path: Path, how: int) -> Iterator[None]:
        fd = self._acquire(path, how)
        try:
            yield
        finally:
            os.close(fd)

    def _acquire(self, path: Path, how: int) -> int:
        # mode counts for the last two levels only; it is masked by the umask, never widened by it.
        self.folder.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        self.folder.mkdir(mode=0o755, exist_ok=True)
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, how)
        except BaseException:
            os.close(fd)
            raise
        return fd


class NoTurns:
    """Stands in for GpuTurns where nothing shares a GPU (the CPU, or one synth worker alone)."""

    waited_s = 0.0
    held_s = 0.0

    def shared(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def exclusive(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()


def turns_for(cache_dir: Path, visible: str | None = None, on_wait: Callable[[bool], None] | None = None) -> GpuTurns:
    """The turns of the physical GPU that a child started with CUDA_VISIBLE_DEVICES=`visible` uses first.

    Args:
        cache_dir: the cache folder shared by everything that uses this machine's GPUs.
        visible: CUDA_VISIBLE_DEVICES as the child will see it (None: this process's own).
        on_wait: as GpuTurns.
    """
    if visible is None:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return GpuTurns(turns_root(cache_dir) / physical_gpu(visible), on_wait)


def turns_root(cache_dir: Path) -> Path:
    """The folder of every GPU's turns under `cache_dir` (hidden from confined candidates)."""
    return Path(cache_dir) / "gpu-turns"


def physical_gpu(visible: str | None) -> str:
    """A name for the physical GPU that is device 0 under CUDA_VISIBLE_DEVICES=`visible` (its UUID).

    Asked of nvidia-smi, not of CUDA, so the caller holds no CUDA context. Indices count in
    nvidia-smi's (PCI bus) order, as CUDA does with CUDA_DEVICE_ORDER=PCI_BUS_ID; the two agree on a
    machine with one kind of GPU.
    """
    first = (visible or "0").split(",")[0].strip()
    if first.startswith(("GPU-", "MIG-")):
        return _safe(first)
    uuids = gpu_uuids()
    if first.isdigit() and int(first) < len(uuids):
        return _safe(uuids[int(first)])
    return _safe(f"index-{first or 0}")


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)
