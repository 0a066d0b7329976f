"""The local pool, the embedded default: build workers on the CPUs, one timing worker per GPU.

A judge job first runs its policy and build stage on a build worker; if it needs timing (it
times, runs on a GPU, or names one in `JudgeJob.gpu`) it then queues for a timing slot (that GPU's,
if named), which it holds alone while its correctness and timing stage runs, so no other job's
build or kernel disturbs its timings. On a machine without a GPU, `cpu_timing_slots` slots
(default 1) play that part. Command jobs run on a build worker, or on a timing slot when they ask
for one.

Every stage runs in a fresh runner process (execution.py): a crashed, hung or hostile candidate
ends with its process, and the next job starts clean. A timing worker keeps the runner of its next
judge stage started ahead, with the candidate's standby worker importing torch and setting up CUDA
(spare.py), and the build workers keep one for the judge stages they run (correctness only, on the CPU),
so a job waits for no process start; still one fresh process per candidate. Back-pressure: `submit` raises
PoolFullError when `max_pending` jobs are waiting, rather than blocking a caller (an HTTP
handler, a trainer step) for an unknown time; callers retry later.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from cuda_agent.errors import ConfigError, PoolFullError, SandboxError
from cuda_agent.judge import JudgeConfig
from cuda_agent.machine import detect_gpus
from cuda_agent.sandbox.cpu_sets import plan_cpu_sets
from cuda_agent.sandbox.execution import (
    NO_VERDICT,
    StageHandle,
    needs_timing,
    note_stage,
    run_stage,
    stage_fields,
    stage_timeout_s,
)
from cuda_agent.sandbox.jobs import CommandJob, CommandResult, JobResult, JudgeJob, PoolMetrics, make_judge_job
from cuda_agent.sandbox.limits import SandboxLimits
from cuda_agent.sandbox.slots import SlotQueue
from cuda_agent.sandbox.spare import SpareRunner, Spares
from cuda_agent.sandbox.stats import PoolStats, queue_size
from cuda_agent.types import Task, Verdict

log = logging.getLogger(__name__)
_STOP = object()


class _Entry:
    """A job in flight: its future, its cancel handle and when it was submitted."""

    def __init__(self, job: JudgeJob | CommandJob) -> None:
        self.job = job
        self.future: Future[JobResult] = Future()
        self.handle = StageHandle()
        self.submitted = time.monotonic()
        self.started: float | None = None
        self.device = "cpu"
        self.times: dict[str, float] = {}
        """Where its seconds went in the pool (note_stage; `sandbox.slot_wait`): added to its verdict's stage_s."""
        self.prepared: float | None = None


class PoolCalls:
    """The blocking calls every pool offers on top of its `submit` (LocalPool and RayPool: one body each)."""

    def submit(self, job: JudgeJob | CommandJob) -> Future[JobResult]:
        raise NotImplementedError

    def run(self, job: JudgeJob | CommandJob) -> JobResult:
        """Submit and wait for the result."""
        return self.submit(job).result()

    def judge(self, task: Task | str, solution: str, config: JudgeConfig | Mapping[str, Any] | None = None) -> Verdict:
        """The verdict of one candidate, as `SandboxClient.judge` gives it (same arguments, same exceptions).

        Raises:
            InfraError: ours (JudgeInfraError, SandboxError, PoolFullError): retry or drop, never score.
            Error: the task, solution or config is wrong.
        """
        return self.run(make_judge_job(task, solution, config)).verdict_or_raise()

    def judge_workspace(
        self, task: Task | str, workspace: Path, config: JudgeConfig | Mapping[str, Any] | None = None
    ) -> Verdict:
        """The verdict of a workspace folder (or solution file) on this machine, as `SandboxClient.judge_workspace`."""
        return self.run(make_judge_job(task, Path(workspace), config)).verdict_or_raise()

    def run_command(self, argv: list[str], cwd: str, timeout_s: float = 600.0, **fields: Any) -> CommandResult:
        """Run a command in a workspace folder, as `SandboxClient.run_command` (SandboxError if it got no result)."""
        return self.run(CommandJob(argv=argv, cwd=cwd, timeout_s=timeout_s, **fields)).command_or_raise()


class LocalPool(PoolCalls):
    """Runs jobs on this machine. Use as a context manager, or call `close()`."""

    def __init__(
        self,
        build_workers: int | None = None,
        gpus: list[int] | None = None,
        cpu_timing_slots: int = 1,
        max_pending: int | None = None,
        limits: SandboxLimits | None = None,
        pin_cpus: bool | None = None,
        cores_per_timing: int = 2,
        judges_per_gpu: int = 2,
        spares: int = 1,
        prepare_spares: int | None = None,
    ) -> None:
        """
        Args:
            build_workers: parallel build/CPU workers (default: the CPU count).
            gpus: GPU indices to time on, one exclusive worker each (default: all visible GPUs).
            cpu_timing_slots: timing workers when there is no GPU (they never overlap each other).
            max_pending: most jobs waiting to start; `submit` raises PoolFullError past it (default:
                `stats.queue_size` of the workers).
            limits: resource limits of every job's processes.
            pin_cpus: keep `cores_per_timing` cores for each timing worker, away from builds: None (default)
                when builds still keep half of the cores, True whenever one core is left for builds, False never.
            cores_per_timing: cores each timing worker keeps when pinned.
            judges_per_gpu: judge stages in flight per GPU. The GPU itself is taken in turns (gpu_turns.py: a
                candidate's correctness and timing, a baseline, alone), so a second stage starts its runner, its
                standby worker and its cached build while the first one has the GPU.
            spares: judge stages' runners that each timing worker keeps started ahead of its next jobs (spare.py):
                one hides a process start that is shorter than a judgement; 0: none.
            prepare_spares: prepare stages' runners that the build workers keep started ahead, each with the
                build's importing child (torch imported: ~5 s of a cold build on the H100); default: `spares` on a
                pool with GPUs, none without (a CPU pool's builds start torch in about a second).
        """
        import os

        self.limits = limits or SandboxLimits()
        self.gpus = detect_gpus() if gpus is None else gpus
        self.spares = spares
        n_build = build_workers or os.cpu_count() or 1
        n_timing = len(self.gpus) or cpu_timing_slots
        # A timing slot's key is its GPU index, or its number on a machine without GPUs (JudgeJob.gpu).
        self.slots = list(self.gpus) or list(range(n_timing))
        self._build_q: queue.Queue = queue.Queue()
        self._timing_q = SlotQueue()
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.cpu_plan = plan_cpu_sets(n_timing, cores_per_timing, pin_cpus)
        if self.cpu_plan.note and pin_cpus is not False:
            log.info("sandbox pool: timing workers not pinned to cores of their own: %s", self.cpu_plan.note)
        # CPU timing slots stay one stage each: nothing but the slot keeps two CPU timings apart.
        per_slot = max(1, judges_per_gpu) if self.gpus else 1
        self.stats = PoolStats(
            workers={"build": n_build, "timing": n_timing * per_slot}, cpus=self.cpu_plan.as_metrics()
        )
        self.max_pending = queue_size(self.stats.workers) if max_pending is None else max_pending
        # A judgement that needs no timing slot (correctness only, on the CPU: `utils.verification`) runs its judge
        # stage on a build worker; the build workers share spares of their own, started at the first such job.
        self._build_spares = Spares(spares, self.limits, {}, self.cpu_plan.build, self.cpu_plan.build)
        count = (spares if self.gpus else 0) if prepare_spares is None else prepare_spares
        self._prepare_spares = Spares(count, self.limits, {}, self.cpu_plan.build, self.cpu_plan.build, "prepare")
        if self.gpus:
            self._prepare_spares.keep("cuda", JudgeConfig())
        self._threads = [
            threading.Thread(target=self._build_loop, args=(f"build-{i}",), daemon=True) for i in range(n_build)
        ] + [
            threading.Thread(target=self._timing_loop, args=(i,), daemon=True)
            for i in range(n_timing)
            for _ in range(per_slot)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, job: JudgeJob | CommandJob) -> Future[JobResult]:
        """Queue a job; its future resolves to exactly one JobResult.

        Raises:
            PoolFullError: `max_pending` jobs are already waiting.
            SandboxError: the pool is closed.
            ConfigError: the caller's mistake: a job with this id is still in flight, or the job asks for a GPU
                (or CPU timing slot) that this pool does not time on.
        """
        check_gpu(job, self.slots, bool(self.gpus))
        with self._lock:
            if self._closed:
                raise SandboxError("the pool is closed: create a new pool to submit more jobs")
            if job.id in self._entries:
                raise ConfigError(f"job {job.id} is already in flight: give each job a new id")
            if self.stats.pending >= self.max_pending:
                raise PoolFullError(
                    f"the sandbox queue is full ({self.max_pending} jobs waiting): retry after results come back, "
                    "or start the pool with a larger max_pending"
                )
            entry = _Entry(job)
            entry.device = self._device_of(job)
            self._entries[job.id] = entry
            self.stats.on_submit()
        if isinstance(job, CommandJob) and job.timing:
            self._timing_q.put(entry)
        else:
            self._build_q.put(entry)
        return entry.future

    def cancel(self, job_id: str) -> bool:
        """Cancel a job that is waiting or running; its result has status 'cancelled'. False if unknown or done."""
        with self._lock:
            entry = self._entries.get(job_id)
        if entry is None:
            return False
        entry.handle.cancel()
        return True

    def metrics(self) -> PoolMetrics:
        return self.stats.snapshot()

    def close(self, wait: bool = True) -> None:
        """Stop accepting jobs; cancel those in flight; stop the workers."""
        with self._lock:
            self._closed = True
            entries = list(self._entries.values())
        for entry in entries:
            entry.handle.cancel()
        for _ in self._threads:
            self._build_q.put(_STOP)
        self._timing_q.stop()
        self._build_spares.close()  # a job running now closes the one it took; none is started after this
        self._prepare_spares.close()
        if not wait:
            return
        for thread in self._threads:
            thread.join(timeout=30)
        with self._lock:
            stranded = list(self._entries.values())
        for entry in stranded:  # queued behind a stopped worker: answered all the same
            self._finish(entry, self._result(entry, "closed", status="cancelled"))

    def __enter__(self) -> LocalPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _device_of(self, job: JudgeJob | CommandJob) -> str:
        requested = job.config.device if isinstance(job, JudgeJob) else "auto"
        if requested == "auto":
            return "cuda" if self.gpus else "cpu"
        return requested

    def _build_loop(self, name: str) -> None:
        while (entry := self._build_q.get()) is not _STOP:
            self._guarded(entry, name, lambda e=entry: self._build_stage(e, name))

    def _timing_loop(self, slot: int) -> None:
        name = f"timing-{slot}"
        env = {"CUDA_VISIBLE_DEVICES": str(self.gpus[slot])} if self.gpus else {}
        cpus = self.cpu_plan.timing[slot] if self.cpu_plan.timing else []
        # A judge job takes the oldest spare (the longest warmed) and starts the next one at once; a pool with
        # GPUs starts its spares with the pool. A spare starts on the build workers' cores and its standby's CUDA
        # set-up waits for a shared GPU turn (standby.set_up_turn), so it never runs on a timing's cores nor on its
        # GPU during a timing. A pool without GPUs starts none before its first timing job (a pool that never
        # times would keep them for nothing).
        spares = Spares(self.spares, self.limits, env, cpus, self.cpu_plan.build)
        if self.gpus and not self._closed:
            spares.keep("cuda", JudgeConfig())
        try:
            while (entry := self._timing_q.get(self.slots[slot])) is not None:
                if not isinstance(entry.job, JudgeJob):  # a command job leaves the spares to the next judge job
                    self._guarded(entry, name, lambda e=entry: self._final_stage(e, name, env, cpus))
                    continue
                with spares.taken(entry.device, entry.job.config, replace=not self._closed) as taken:
                    self._guarded(entry, name, lambda e=entry, t=taken: self._final_stage(e, name, env, cpus, t))
        finally:
            spares.close()

    def _guarded(self, entry: _Entry, worker: str, step) -> None:
        """Run one step of a job; whatever goes wrong in our code still answers the job once."""
        try:
            if entry.started is None:
                if not entry.future.set_running_or_notify_cancel():
                    self._forget(entry)
                    return
                entry.started = time.monotonic()
                self.stats.on_start()
            if entry.handle.cancelled:
                self._finish(entry, self._result(entry, worker, status="cancelled"))
                return
            result = step()
            if result is not None:
                self._finish(entry, result)
        except Exception as exc:  # a bug of ours must not leave a caller waiting forever
            log.exception("sandbox worker %s failed on job %s", worker, entry.job.id)
            failed = self._result(
                entry, worker, status="failed", error=f"sandbox error: {exc!r}", error_type="SandboxError"
            )
            self._finish(entry, failed)

    def _build_stage(self, entry: _Entry, worker: str) -> JobResult | None:
        job = entry.job
        build_cpus = self.cpu_plan.build
        if isinstance(job, CommandJob):
            return self._final_stage(entry, worker, {}, build_cpus)
        limit_s = stage_timeout_s(job, "prepare")
        with self._prepare_spares.taken(entry.device, job.config, replace=not self._closed) as spare:
            stage = run_stage(job, "prepare", self.limits, entry.device, limit_s, {}, entry.handle, build_cpus, spare)
        self.stats.on_busy("build", stage.wall_s)
        note_stage(entry.times, "prepare", stage)
        entry.prepared = time.monotonic()
        fields = stage_fields(job, stage, entry.times)
        if fields is not None:
            return self._result(entry, worker, **fields)
        if needs_timing(job, entry.device) or job.gpu is not None:
            self._timing_q.put(entry, job.gpu)
            return None
        with self._build_spares.taken(entry.device, job.config, replace=not self._closed) as spare:
            return self._final_stage(entry, worker, {}, build_cpus, spare)

    def _final_stage(
        self, entry: _Entry, worker: str, env: dict[str, str], cpus: list[int], spare: SpareRunner | None = None
    ) -> JobResult:
        job = entry.job
        phase = "command" if isinstance(job, CommandJob) else "judge"
        limit_s = job.timeout_s if isinstance(job, CommandJob) else stage_timeout_s(job, "judge")
        if entry.prepared is not None:  # the wait for a timing slot (or a build worker) after its prepare
            entry.times["sandbox.slot_wait"] = time.monotonic() - entry.prepared
        stage = run_stage(job, phase, self.limits, entry.device, limit_s, env, entry.handle, cpus, spare)
        self.stats.on_busy("timing" if worker.startswith("timing") else "build", stage.wall_s)
        note_stage(entry.times, phase, stage)
        fields = stage_fields(job, stage, entry.times) or {
            "status": "failed",
            "error": NO_VERDICT,
            "error_type": "SandboxError",
        }
        return self._result(entry, worker, **fields)

    def _result(self, entry: _Entry, worker: str, status: str = "done", **fields) -> JobResult:
        now = time.monotonic()
        started = entry.started or now
        return JobResult(
            job_id=entry.job.id,
            kind=entry.job.kind,
            status=status,
            queued_s=started - entry.submitted,
            run_s=now - started,
            worker=worker,
            **fields,
        )

    def _finish(self, entry: _Entry, result: JobResult) -> None:
        with self._lock:
            if self._entries.pop(entry.job.id, None) is None:
                log.error("job %s answered twice; the second answer is dropped", entry.job.id)
                return
        self.stats.on_finish(result, time.monotonic() - entry.submitted)
        entry.future.set_result(result)

    def _forget(self, entry: _Entry) -> None:
        with self._lock:
            self._entries.pop(entry.job.id, None)
        self.stats.on_forget()


def check_gpu(job: JudgeJob | CommandJob, slots: list[int], has_gpus: bool) -> None:
    """Refuse a job pinned to a GPU (or CPU timing slot) that the pool does not have, or a judgement asked on
    `cuda` of a pool without GPUs (at once, as the CLI does: it would fail as ours in the worker, after a build).

    Raises:
        ConfigError: `job.gpu` is not one of `slots`, or device cuda without a GPU (the caller's mistake: retrying
            cannot help).
    """
    if isinstance(job, JudgeJob) and job.config.device == "cuda" and not has_gpus:
        raise ConfigError(
            f"job {job.id} asks for device cuda, but this pool has no GPU: use device cpu or auto, or a service "
            "on a GPU machine"
        )
    gpu = getattr(job, "gpu", None)
    if gpu is not None and gpu not in slots:
        raise ConfigError(
            f"job {job.id} asks for GPU {gpu}, but this pool times only on {slots} "
            "(GPU indices, or CPU timing slot numbers on a pool without GPUs): pick one of those, or leave gpu unset"
        )
