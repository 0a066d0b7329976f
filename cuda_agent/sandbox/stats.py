"""Counters of a pool (queue depth, jobs by status and verdict, latency percentiles), its measured capacity and
the queue size that follows from it."""

from __future__ import annotations

import threading
from collections import Counter, deque

from cuda_agent.sandbox.jobs import Capacity, JobResult, PoolMetrics

LATENCY_WINDOW = 10_000
QUEUE_PER_WORKER = 64
"""Jobs a pool lets wait per job it runs at once: a trainer's burst (1,024 episodes judging together) waits in the
queue rather than bouncing off it, while the wait stays bounded (64 judgements of a worker, not an unbounded pile)."""


def queue_size(workers: dict[str, int]) -> int:
    """The pool's queue limit sized from what it runs at once (`QUEUE_PER_WORKER` each), at least 256."""
    return max(256, QUEUE_PER_WORKER * sum(workers.values()))


def capacity(metrics: PoolMetrics, timing_slots: int, max_pending: int) -> Capacity:
    """Judgements an hour the pool can answer, measured from the worker time its judgements took so far.

    Each kind of worker (builds on CPUs, judge stages on GPUs) answers `workers x 3600 / seconds per judgement`
    an hour; the slower kind bounds the pool. Worker seconds include the workspace commands episodes run there,
    so the figure is per judgement of a real episode mix. Measured under light load it errs high (a judge stage
    that shares its GPU waits less than at saturation); a warm-up under the training load gives the real figure.
    """
    judged = sum(metrics.by_verdict.values())
    per_judgement = {kind: busy / judged for kind, busy in metrics.busy_s.items() if judged and busy > 0}
    rates = {kind: metrics.workers[kind] * 3600 / s for kind, s in per_judgement.items() if metrics.workers.get(kind)}
    bottleneck = min(rates, key=rates.__getitem__) if rates else None
    rate = rates[bottleneck] if bottleneck else None
    return Capacity(
        judgements=judged,
        timing_slots=timing_slots,
        worker_s_per_judgement=per_judgement,
        judgements_per_hour=rate,
        judgements_per_hour_per_gpu=rate / timing_slots if rate and timing_slots else None,
        bottleneck=bottleneck,
        max_pending=max_pending,
    )


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0-100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


class PoolStats:
    """Thread-safe counters; one per pool (no globals)."""

    def __init__(self, workers: dict[str, int], cpus: dict[str, list[int]] | None = None) -> None:
        self.workers = workers
        self.cpus = cpus or {}
        self._lock = threading.Lock()
        self.submitted = self.started = self.completed = self.forgotten = 0
        self.by_status: Counter[str] = Counter()
        self.by_verdict: Counter[str] = Counter()
        self.by_error: Counter[str] = Counter()
        self.latencies: deque[float] = deque(maxlen=LATENCY_WINDOW)
        self.busy_s: Counter[str] = Counter()

    def on_busy(self, kind: str, seconds: float) -> None:
        """A worker of `kind` ('build', 'timing') ran a stage for `seconds`."""
        with self._lock:
            self.busy_s[kind] += seconds

    @property
    def pending(self) -> int:
        return self.submitted - self.started - self.forgotten

    def on_submit(self) -> None:
        with self._lock:
            self.submitted += 1

    def on_start(self) -> None:
        with self._lock:
            self.started += 1

    def on_forget(self) -> None:
        """A job cancelled through its Future before it started."""
        with self._lock:
            self.forgotten += 1

    def on_finish(self, result: JobResult, latency_s: float) -> None:
        with self._lock:
            self.completed += 1
            self.by_status[result.status] += 1
            if result.verdict is not None:
                self.by_verdict[result.verdict.verdict] += 1
            if result.status == "failed":
                self.by_error[result.error_type or "unknown"] += 1
            self.latencies.append(latency_s)

    def snapshot(self) -> PoolMetrics:
        with self._lock:
            lat = list(self.latencies)
            latency = {f"p{q}": percentile(lat, q) for q in (50, 90, 99)} | {"max": max(lat)} if lat else {}
            return PoolMetrics(
                queue_depth=self.pending,
                running=self.started - self.completed,
                submitted=self.submitted,
                completed=self.completed,
                by_status=dict(self.by_status),
                by_verdict=dict(self.by_verdict),
                by_error=dict(self.by_error),
                latency_s=latency,
                workers=dict(self.workers),
                cpus=dict(self.cpus),
                busy_s=dict(self.busy_s),
            )
