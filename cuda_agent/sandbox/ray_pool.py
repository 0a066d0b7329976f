"""The Ray pool: the local pool's interface, with workers as Ray actors spread over many machines.

One actor per GPU in the cluster (`num_gpus=1`, so Ray gives each its own GPU and the actor
times alone on it); on a cluster without GPUs, `cpu_actors` CPU actors. Each actor runs one job
at a time, every stage in a fresh hardened runner process on its own machine (execution.py),
so a hostile candidate ends with its runner; an actor that dies anyway answers its job as
failed and is restarted by Ray. Each actor keeps the runner of its next judge stage started ahead
(`spares`, spare.py, as a LocalPool timing worker does), with the candidate's standby worker
importing torch and setting up CUDA meanwhile, so a judgement waits for no process start; still one
fresh process per candidate: a spare is used once, one started for another device, environment or
config is closed and replaced. A GPU actor starts its spares when it starts, a CPU actor at its
first judge job; the pool's `close` has every actor close its spares before it is killed (a spare of
an actor that died otherwise ends when it reads the end of its stdin, leaving its folder in the
temporary directory). A job pinned to a GPU (`JudgeJob.gpu`) goes to the actor that
holds that GPU of its machine (on a cluster of several machines, any one of them); on a cluster
without GPUs, to that CPU actor. Ray is imported only when a RayPool is created.

What this does not do (yet): split builds onto CPU-only actors; on a GPU actor the build runs on
that machine's CPUs while the actor holds its GPU.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from typing import Any

from cuda_agent.errors import ConfigError, ProtocolError, SandboxError
from cuda_agent.judge import JudgeConfig
from cuda_agent.sandbox.execution import StageHandle, run_job
from cuda_agent.sandbox.jobs import CommandJob, JobResult, JudgeJob, PoolMetrics
from cuda_agent.sandbox.limits import SandboxLimits
from cuda_agent.sandbox.local import PoolCalls, PoolFullError, check_gpu
from cuda_agent.sandbox.slots import SlotQueue
from cuda_agent.sandbox.spare import CLOSE_S, Spares
from cuda_agent.sandbox.stats import PoolStats, queue_size
from cuda_agent.subproc import read_record

log = logging.getLogger(__name__)
ACTOR_START_S = 300.0


class SandboxActor:
    """Runs jobs on one machine (and one GPU, when it has one). Wrapped by `ray.remote` at pool start."""

    def __init__(self, limits_json: str, device: str, index: int, spares: int = 0) -> None:
        self.limits = SandboxLimits.model_validate_json(limits_json)
        self.device = device
        self.index = index
        self.handles: dict[str, StageHandle] = {}
        # Its stages run on any of its machine's cores: a spare waits there too (its standby's CUDA set-up waits
        # for a GPU turn, standby.set_up_turn). Without a GPU, none before the first judge job (as LocalPool).
        self.spares = Spares(spares, self.limits, {}, [], [])
        # and its prepare stages' runners, each with the build's importing child (on GPU machines, as LocalPool)
        self.prepare_spares = Spares(spares if device == "cuda" else 0, self.limits, {}, [], [], "prepare")
        if device == "cuda":
            self.spares.keep("cuda", JudgeConfig())
            self.prepare_spares.keep("cuda", JudgeConfig())

    def slot(self) -> int:
        """The GPU this actor holds, numbered as on its machine; its index among the pool's actors without GPUs."""
        if self.device != "cuda":
            return self.index
        import ray

        ids = ray.get_gpu_ids()
        try:
            return int(ids[0])
        except (IndexError, TypeError, ValueError):  # GPUs named by UUID: number them by actor instead
            return self.index

    def run(self, job_json: str) -> str:
        """Run the job (a `Job`'s JSON); its `JobResult`'s JSON (the pool sets how long it queued and ran)."""
        from pydantic import TypeAdapter

        from cuda_agent.sandbox.jobs import Job

        job = TypeAdapter(Job).validate_json(job_json)
        handle = self.handles.setdefault(job.id, StageHandle())
        try:
            device = job.config.device if isinstance(job, JudgeJob) else self.device
            device = self.device if device == "auto" else device
            worker = f"{_node_name()}/{'gpu' if self.device == 'cuda' else 'cpu'}-{self.slot()}"
            fields = run_job(job, self.limits, device, {}, handle, self.spares, self.prepare_spares)
            return JobResult(job_id=job.id, kind=job.kind, worker=worker, **fields).model_dump_json()
        finally:
            self.handles.pop(job.id, None)

    def cancel(self, job_id: str) -> bool:
        # Runs beside `run` (the actor allows two concurrent calls), so it can kill a running job.
        handle = self.handles.setdefault(job_id, StageHandle())
        handle.cancel()
        return True

    def close(self) -> None:
        """Close the spares (the pool's `close`, before it kills the actor: a killed actor closes nothing)."""
        self.spares.close()
        self.prepare_spares.close()


def _answer(job: CommandJob | JudgeJob, answer: str) -> JobResult:
    """A Ray actor's answer to `job` (`SandboxActor.run`); one that is no JobResult of this job, a failure of ours."""
    try:
        result = read_record(JobResult, answer, "a Ray actor")
    except ProtocolError as exc:
        return JobResult(job_id=job.id, kind=job.kind, status="failed", error=str(exc), error_type="ProtocolError")
    if result.job_id != job.id:
        why = f"a Ray actor answered job {job.id} with the result of {result.job_id}: ours; retry"
        return JobResult(job_id=job.id, kind=job.kind, status="failed", error=why, error_type="ProtocolError")
    return result


def _node_name() -> str:
    import socket

    return socket.gethostname()


class RayPool(PoolCalls):
    """Same interface as LocalPool: submit / run / cancel / metrics / close."""

    def __init__(
        self,
        address: str | None = None,
        cpu_actors: int = 2,
        max_pending: int | None = None,
        limits: SandboxLimits | None = None,
        init_kwargs: dict[str, Any] | None = None,
        spares: int = 1,
    ) -> None:
        """
        Args:
            address: a Ray cluster address ('auto' joins a running cluster); None starts a local Ray.
            cpu_actors: actors when the cluster has no GPUs.
            max_pending: most jobs waiting to start; `submit` raises PoolFullError past it (default:
                `stats.queue_size` of the actors).
            limits: resource limits of every job's processes.
            init_kwargs: more arguments for `ray.init` (e.g. num_cpus=2, include_dashboard=False).
            spares: judge stages' runners each actor keeps started ahead of its next jobs (spare.py, as
                LocalPool's `spares`); 0: none.
        """
        try:
            import ray
        except ImportError as exc:
            raise SandboxError("the Ray pool needs ray: pip install 'ray>=2.40,<3'") from exc
        if not ray.is_initialized():
            ray.init(address=address, **(init_kwargs or {}))
        gpus = int(ray.cluster_resources().get("GPU", 0))
        limits_json = (limits or SandboxLimits()).model_dump_json()
        remote = ray.remote(SandboxActor)
        # Two concurrent calls per actor: one job at a time in `run`, plus `cancel` beside it.
        options = {"max_concurrency": 2, "max_restarts": -1} | ({"num_gpus": 1} if gpus else {"num_cpus": 1})
        device = self._device = "cuda" if gpus else "cpu"
        self._actors = [
            remote.options(**options).remote(limits_json, device, i, spares) for i in range(gpus or cpu_actors)
        ]
        try:  # also waits for the actors to start: a cluster that cannot place them would block for ever
            self.slots: list[int] = ray.get([actor.slot.remote() for actor in self._actors], timeout=ACTOR_START_S)
        except ray.exceptions.GetTimeoutError as exc:
            for actor in self._actors:
                ray.kill(actor)
            raise SandboxError(
                f"the Ray sandbox actors did not start within {ACTOR_START_S:.0f} s: check `ray status` for "
                f"{len(self._actors)} free {'GPUs' if gpus else 'CPUs'} and the workers' logs"
            ) from exc
        self._kind = "gpu" if gpus else "cpu"  # the actors' kind in the pool's counters
        self.stats = PoolStats(workers={self._kind: len(self._actors)})
        self.max_pending = queue_size(self.stats.workers) if max_pending is None else max_pending
        self._queue = SlotQueue()
        self._futures: dict[str, Future[JobResult]] = {}
        self._running: dict[str, Any] = {}
        self._cancelled: set[str] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._dispatch, args=(actor, slot), daemon=True)
            for actor, slot in zip(self._actors, self.slots, strict=True)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, job: JudgeJob | CommandJob) -> Future[JobResult]:
        """Queue a job; its future resolves to exactly one JobResult (raises as LocalPool.submit)."""
        check_gpu(job, self.slots, self._device == "cuda")
        with self._lock:
            if self._closed:
                raise SandboxError("the pool is closed: create a new pool to submit more jobs")
            if job.id in self._futures:
                raise ConfigError(f"job {job.id} is already in flight: give each job a new id")
            if self.stats.pending >= self.max_pending:
                raise PoolFullError(f"the sandbox queue is full ({self.max_pending} jobs waiting): retry later")
            future: Future[JobResult] = Future()
            self._futures[job.id] = future
            self.stats.on_submit()
            # Queued under the lock, so that `close` cannot stop the dispatchers between the check and the put.
            self._queue.put((job, time.monotonic()), getattr(job, "gpu", None))
        return future

    def cancel(self, job_id: str) -> bool:
        with self._lock:
            if job_id not in self._futures:
                return False
            self._cancelled.add(job_id)
            actor = self._running.get(job_id)
        if actor is not None:
            actor.cancel.remote(job_id)
        return True

    def metrics(self) -> PoolMetrics:
        return self.stats.snapshot()

    def close(self) -> None:
        """Cancel what is in flight, stop the dispatchers and kill the actors (Ray itself stays up)."""
        import ray

        with self._lock:
            self._closed = True
            in_flight = list(self._futures)
        for job_id in in_flight:
            self.cancel(job_id)
        self._queue.stop()
        for thread in self._threads:
            thread.join(timeout=30)
        try:
            ray.get([actor.close.remote() for actor in self._actors], timeout=CLOSE_S + 30)
        except ray.exceptions.RayError:  # an actor died or hangs: its spares end with their stdin (module doc)
            log.warning("a Ray sandbox actor did not close its spare runners", exc_info=True)
        for actor in self._actors:
            ray.kill(actor)

    def __enter__(self) -> RayPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _dispatch(self, actor: Any, slot: int) -> None:
        import ray

        while (item := self._queue.get(slot)) is not None:
            job, submitted = item
            started = time.monotonic()
            self.stats.on_start()
            with self._lock:
                cancelled = job.id in self._cancelled
                self._running[job.id] = actor
            result = JobResult(job_id=job.id, kind=job.kind, status="cancelled")
            if not cancelled:
                try:
                    answer = ray.get(actor.run.remote(job.model_dump_json()))
                except Exception as exc:  # RayActorError and kin: the actor died; Ray restarts it
                    why = f"the Ray worker failed ({type(exc).__name__}: {exc}); retry"
                    result = JobResult(
                        job_id=job.id, kind=job.kind, status="failed", error=why, error_type="SandboxError"
                    )
                    _await_restart(actor)
                else:
                    result = _answer(job, answer)
            status = "cancelled" if job.id in self._cancelled else result.status
            result = result.model_copy(
                update={"status": status, "queued_s": started - submitted, "run_s": time.monotonic() - started}
            )
            self.stats.on_busy(self._kind, result.run_s)  # the actor's time, for the capacity GET /stats reports
            self._finish(job.id, result, time.monotonic() - submitted)

    def _finish(self, job_id: str, result: JobResult, latency_s: float) -> None:
        with self._lock:
            future = self._futures.pop(job_id, None)
            self._running.pop(job_id, None)
            self._cancelled.discard(job_id)
        if future is None:
            log.error("job %s answered twice; the second answer is dropped", job_id)
            return
        self.stats.on_finish(result, latency_s)
        future.set_result(result)


def _await_restart(actor: Any, limit_s: float = 120.0) -> None:
    """Block this actor's dispatcher until Ray has restarted the actor, so the next job does not
    land on a dead handle and fail too; give up (and let the next job report it) after `limit_s`."""
    import ray

    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            ray.get(actor.__ray_ready__.remote(), timeout=10)
            return
        except Exception:  # still restarting (ActorUnavailableError, GetTimeoutError, RayActorError)
            time.sleep(0.5)
    log.warning("a Ray sandbox actor did not come back within %.0f s", limit_s)
