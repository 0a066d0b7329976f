"""Parent side of the filter workers: a pool of long-lived `worker.py` processes.

Each worker is started ahead as every process of ours is (`subproc.Ahead`: its own process group, one typed order
a line on stdin, here a `FilterRequest` per problem) and serves problem after problem; one that passes the per-problem
time limit or dies is killed with its group and replaced, and its problem is recorded as 'timeout' or
'crash' (data, not an error: the problem did it), except a worker killed outright (SIGKILL) beside other
workers: the kernel's OOM killer, most likely, for memory the workers share, so 'out_of_memory', which the
audit runs again alone. On the CPU each worker maps at most its share of the memory `tasks show --inspect`
may use (FilterConfig.memory_cap_bytes), so a problem too big fails in its own worker first.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO

from cuda_agent.errors import SandboxError
from cuda_agent.gpu_turns import turns_for
from cuda_agent.machine import cache_root
from cuda_agent.subproc import Ahead, child_env, read_record
from cuda_agent.synth.filters import OUT_OF_MEMORY, FilterConfig, FilterRequest, FilterResult
from cuda_agent.synth.worker import READY_LINE, WAIT_PREFIX
from cuda_agent.tasks.inspection import machine_memory


class WorkerStartError(SandboxError):
    """A filter worker died or hung before it was ready: the environment's fault, not a problem's."""


class WaitClock:
    """How long a worker has waited for GPU turns since `reset`, a wait in progress included."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.total = 0.0
        self.since: float | None = None

    def reset(self) -> None:
        with self.lock:
            self.total, self.since = 0.0, None

    def mark(self, waiting: bool) -> None:
        with self.lock:
            now = time.monotonic()
            if waiting and self.since is None:
                self.since = now
            elif not waiting and self.since is not None:
                self.total += now - self.since
                self.since = None

    def waited(self) -> float:
        with self.lock:
            return self.total + (time.monotonic() - self.since if self.since is not None else 0.0)


class FilterWorker:
    """One worker process and the thread that reads its results; `shared`: other workers run beside it, so the
    machine's memory running out may be theirs as much as its problem's."""

    def __init__(self, config: FilterConfig, log: IO[str] | None = None, shared: bool = False) -> None:
        self.config = config
        self.log = log
        self.shared = shared
        self.process: Ahead | None = None
        self.ended = threading.Event()
        """Set when the worker's stdout closed: it died (or was stopped)."""
        self.ready = threading.Event()
        self.folder = Path(tempfile.mkdtemp(prefix="cuda-agent-synth-"))
        """Where the worker writes each result (worker.py), one file per request."""
        self.waits = WaitClock()
        self.handled = 0

    def start(self) -> None:
        """Start the worker and wait until it is warm (worker.warm_up), so no problem pays its cold start."""
        extra = {"CUDA_VISIBLE_DEVICES": ""} if self.config.device == "cpu" else {}
        # Inductor's default compiles in a pool of one process per core, per worker: 12 workers on 16 cores
        # would start 192. The workers are the parallelism; each compiles in its own process.
        extra.setdefault("TORCHINDUCTOR_COMPILE_THREADS", os.environ.get("TORCHINDUCTOR_COMPILE_THREADS", "1"))
        env = child_env(extra)
        # Not dying with the thread that starts it: the pool's threads take turns with its workers.
        self.process = Ahead(
            [sys.executable, "-m", "cuda_agent.synth.worker", self.config.model_dump_json()],
            die_with_us=False,
            stdout=subprocess.PIPE,
            stderr=self.log if self.log is not None else subprocess.DEVNULL,
            text=True,
            env=env,
        )
        self.ended, self.ready = threading.Event(), threading.Event()
        args = (self.process.proc, self.ended, self.ready, self.waits)
        threading.Thread(target=self._read, args=args, daemon=True).start()
        if not self.ready.wait(self.config.startup_s) or self.ended.is_set():  # set, but by the end of stdout
            try:
                code = self.process.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
            self.stop()
            where = f"its stderr is in {self.log.name}" if self.log is not None else "run with a log to see why"
            state = f"exited with {code}" if code is not None else f"was not ready in {self.config.startup_s:.0f} s"
            raise WorkerStartError(f"a synthesis filter worker {state} before its first problem ({where}); "
                                   "check that torch imports and that the device works there")  # fmt: skip

    @staticmethod
    def _read(proc: subprocess.Popen[str], ended: threading.Event, ready: threading.Event, waits: WaitClock) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(WAIT_PREFIX):
                waits.mark(line[len(WAIT_PREFIX) :].strip() == "1")
            elif line.rstrip("\n") == READY_LINE:
                ready.set()
        ended.set()  # end of stream: the worker died
        ready.set()  # and start() should not wait for it

    def check(self, index: int, code: str) -> FilterResult:
        """Filter one problem; restarts the worker after a timeout or a crash."""
        if self.process is None or self.process.proc.poll() is not None:
            self.start()
        assert self.process is not None
        result = self.folder / f"{self.handled}-{index}.json"
        try:
            self.waits.reset()
            sent = self.process.send(FilterRequest(index=index, code=code, result=str(result)))
            line = self._result(result) if sent else None
        except OSError:
            line = None
        except queue.Empty:
            waited = self.waits.waited()
            self.stop()
            detail = f"no result in {self.config.timeout_s:.0f} s of work ({waited:.0f} s more waiting for GPU turns)"
            return FilterResult(index=index, reason="timeout", detail=detail)
        if line is None:
            try:  # stdout closed a moment before the process is reaped
                code_ = self.process.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code_ = None
            self.stop()
            if code_ == -signal.SIGKILL and self.shared:  # not ours: the kernel's OOM killer, most likely
                detail = "worker killed (SIGKILL) beside other workers: out of memory? it runs again alone"
                return FilterResult(index=index, reason=OUT_OF_MEMORY, detail=detail)
            return FilterResult(index=index, reason="crash", detail=f"worker exited with {code_}")
        self.handled += 1
        return read_record(FilterResult, line, "a synthesis filter worker")

    def _result(self, path: Path) -> str | None:
        """The result the worker wrote to `path`; None if it died first; queue.Empty after `timeout_s` of work.

        Time spent waiting for GPU turns is not work: one worker's long run holds a timer, and the timer
        every other worker; counted, it marked 9 innocent H200 candidates 'timeout' with the one slow one.
        The holder's own limit ends such a wait. Waits count again past `wait_cap` x `timeout_s` in all, so
        that nothing waits forever."""
        start, limit = time.monotonic(), self.config.timeout_s
        while True:
            elapsed = time.monotonic() - start
            left = limit + min(self.waits.waited(), self.config.wait_cap * limit) - elapsed
            died = self.ended.is_set()  # read before the file: a result written just before dying still counts
            if path.exists():
                text = path.read_text()
                path.unlink()
                return text
            if died:
                return None
            if left <= 0:
                raise queue.Empty
            time.sleep(min(left, _POLL_S))

    def stop(self) -> None:
        if self.process is not None:
            self.process.end()
            self.process = None


_POLL_S = 0.02  # how often a result file is looked for: small beside a problem's seconds of filtering


class FilterPool:
    """`workers` filter workers fed from one stream of (index, code)."""

    def __init__(self, config: FilterConfig, workers: int, log_path: Path | None = None) -> None:
        self.log = log_path.open("a") if log_path is not None else None
        self.turns_dir: str | None = config.turns_dir
        if config.device == "cuda" and config.turns_dir is None:
            # The GPU's own turns (gpu_turns.py), shared with judgements and other pools: timings run alone.
            self.turns_dir = str(turns_for(cache_root()).folder)
            config = config.model_copy(update={"turns_dir": self.turns_dir})
        if config.device == "cpu" and config.memory_cap_bytes is None:
            config = config.model_copy(update={"memory_cap_bytes": machine_memory().cap // max(1, workers)})
        self.config = config
        self.idle: queue.Queue[FilterWorker] = queue.Queue()
        self.all = [FilterWorker(config, self.log, shared=workers > 1) for _ in range(workers)]
        for worker in self.all:
            self.idle.put(worker)
        self.workers = workers

    def _check(self, item: tuple[int, str]) -> FilterResult:
        worker = self.idle.get()
        try:
            return worker.check(*item)
        finally:
            self.idle.put(worker)

    def map(self, items: Iterable[tuple[int, str]], on_result: Callable[[FilterResult], bool]) -> None:
        """Filter items, calling `on_result` for each as it finishes; stop early when it returns False.

        At most 2 x workers items are in flight, so an early stop wastes little and a lazy `items`
        (the composer) is drawn only as fast as the workers eat.
        """
        with ThreadPoolExecutor(self.workers) as executor:
            pending: set = set()
            iterator: Iterator[tuple[int, str]] = iter(items)
            go_on = True
            try:
                while go_on:
                    while len(pending) < 2 * self.workers and (item := next(iterator, None)) is not None:
                        pending.add(executor.submit(self._check, item))
                    if not pending:
                        break
                    done = next(_as_completed(pending))
                    pending.discard(done)
                    go_on = on_result(done.result())
            except BaseException:
                # Interrupted (Ctrl-C, SIGTERM): kill the workers now so that the threads waiting on them
                # return at once instead of at their time limit.
                self.close()
                raise
            finally:
                for future in pending:
                    future.cancel()

    def close(self) -> None:
        for worker in self.all:
            worker.stop()
            shutil.rmtree(worker.folder, ignore_errors=True)
        if self.log is not None and not self.log.closed:
            self.log.close()

    def __enter__(self) -> FilterPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _as_completed(futures: set) -> Iterator:
    from concurrent.futures import FIRST_COMPLETED, wait

    while True:
        done, _ = wait(futures, return_when=FIRST_COMPLETED)
        yield from done
