"""Counters of a pool (queue depth, jobs by status and verdict, latency percentiles) and GPU discovery."""

from __future__ import annotations

import threading
from collections import Counter, deque

from cuda_agent.sandbox.jobs import JobResult, PoolMetrics

LATENCY_WINDOW = 10_000


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
