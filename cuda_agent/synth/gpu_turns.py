"""Turns on a GPU shared by filter workers: many run models at once, one times alone.

Filter workers share one GPU. Their eager runs may overlap, but a timing under another worker's
kernels measures the contention, not the problem: on the H200 with 12 workers, one row's eager time
read 0.84 ms in one audit and 4.2 ms in the next, and 11% of rows changed their time-window verdict.
So a timing takes the GPU exclusively and the runs share it: a readers-writer lock between processes,
built from two `flock`s. A timer first closes the gate, so no new run starts, then waits for the runs
in progress; runs pass the gate only for a moment. The OS releases a dead worker's locks.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path


class GpuTurns:
    """A readers-writer lock over the files `gate` and `gpu` in `folder` (shared by the workers of one GPU)."""

    def __init__(self, folder: str | Path, on_wait: Callable[[bool], None] | None = None) -> None:
        self.gate = Path(folder) / "gate"
        self.gpu = Path(folder) / "gpu"
        self.waited_s = 0.0
        """Time spent waiting for turns, so a slow run can tell waiting from working."""
        self.on_wait = on_wait
        """Called with True when a wait starts and False when it ends: one worker's long run makes the others
        wait, and their time limits should not count that (pool.py)."""

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """Run kernels beside other workers' runs, never during a timing."""
        with self._waiting():
            with self._locked(self.gate, fcntl.LOCK_EX):
                gpu = self._acquire(self.gpu, fcntl.LOCK_SH)
        try:
            yield
        finally:
            os.close(gpu)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Have the GPU alone: new runs wait at the gate, runs in progress finish first."""
        with self._waiting():
            gate = self._acquire(self.gate, fcntl.LOCK_EX)
            try:
                gpu = self._acquire(self.gpu, fcntl.LOCK_EX)
            except BaseException:
                os.close(gate)
                raise
        try:
            yield
        finally:
            os.close(gpu)
            os.close(gate)

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

    @staticmethod
    def _acquire(path: Path, how: int) -> int:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, how)
        except BaseException:
            os.close(fd)
            raise
        return fd


class NoTurns:
    """Stands in for GpuTurns where workers do not share a GPU (one worker, or the CPU)."""

    waited_s = 0.0

    def shared(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def exclusive(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()
