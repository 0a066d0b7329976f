"""Back-pressure instead of loss: `cuda-agent serve`'s app under the request pattern of 1,024 concurrent episodes,
a client that waits out a full queue and a restarting service, and the measured capacity `GET /stats` reports.

The load test's pool is a test double for the judge (`PacedPool`: each job takes a fixed time on a few worker
threads, behind the same bounded queue and counters as LocalPool); the real judge behind the same app is
exercised in test_service.py and test_paths.py. Everything else is real: the FastAPI app, uvicorn, HTTP, the client.
"""

from __future__ import annotations

import queue
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest

from cuda_agent.cli import main
from cuda_agent.errors import PoolFullError, ServiceUnreachableError
from cuda_agent.rl.preflight import fetch_stats
from cuda_agent.sandbox.client import SandboxClient
from cuda_agent.sandbox.jobs import JobResult, JudgeJob
from cuda_agent.sandbox.service import create_app
from cuda_agent.sandbox.stats import PoolStats, capacity, queue_size
from cuda_agent.types import Verdict

SOLUTION = "class ModelNew: pass\n"


class PacedPool:
    """A judge double: every job passes after `work_s` on one of `workers` threads; a queue of `max_pending`."""

    def __init__(self, workers: int = 8, max_pending: int = 32, work_s: float = 0.002) -> None:
        self.slots, self.max_pending, self.work_s = [0], max_pending, work_s
        self.stats = PoolStats(workers={"timing": workers})
        self._jobs: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self.ids: list[str] = []
        for _ in range(workers):
            threading.Thread(target=self._work, daemon=True).start()

    def submit(self, job: JudgeJob) -> Future[JobResult]:
        with self._lock:
            if self.stats.pending >= self.max_pending:
                raise PoolFullError(f"the sandbox queue is full ({self.max_pending} jobs waiting)")
            self.stats.on_submit()
            self.ids.append(job.id)
        future: Future[JobResult] = Future()
        self._jobs.put((job, future))
        return future

    def _work(self) -> None:
        while True:
            job, future = self._jobs.get()
            self.stats.on_start()
            time.sleep(self.work_s)
            verdict = Verdict(task=job.task.ref, verdict="pass", reward=1, correct=True)
            result = JobResult(job_id=job.id, kind="judge", status="done", verdict=verdict)
            self.stats.on_busy("timing", self.work_s)
            self.stats.on_finish(result, self.work_s)
            future.set_result(result)

    def metrics(self) -> Any:
        return self.stats.snapshot()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def serving(pool: Any, port: int) -> Iterator[str]:
    """The service's app on uvicorn, as `cuda-agent serve` runs it, in a thread of this process."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(create_app(pool), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join()


@pytest.mark.parametrize(
    ("episodes", "max_pending"),
    [(64, 8), pytest.param(1024, 32, marks=pytest.mark.slow)],  # 1,024: the paper's batch, ~45 s on 2 cores
)
def test_concurrent_episodes_against_a_small_queue_lose_no_judgement(
    episodes: int, max_pending: int, capsys: pytest.CaptureFixture[str]
) -> None:
    pool = PacedPool(workers=8, max_pending=max_pending)
    checks = 2

    def episode(url: str, n: int) -> tuple[int, int]:
        with SandboxClient(url, backoff_s=0.05, max_backoff_s=0.5, retry_s=120) as client:
            passed = sum(
                client.judge("examples/relu", SOLUTION, job_id=f"episode-{n}-{k}").verdict == "pass"
                for k in range(checks)
            )
            return passed, client.retries

    with serving(pool, _free_port()) as url, ThreadPoolExecutor(max_workers=episodes) as threads:
        results = list(threads.map(lambda n: episode(url, n), range(episodes)))
        stats = fetch_stats(url)
        assert main(["plan", "--episodes", "1024", "--checks", "8", "--seconds", "60", "--sandbox", url]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith(f"judge: {8 * 3600 / 0.002:.0f} judgements an hour a GPU, measured at {url}")
    assert printed[1:] == ["a step: 1024 episodes x 8 checks = 8192 judgements within 60 s", "judge GPUs needed: 1"]
    assert sum(passed for passed, _ in results) == episodes * checks  # every judgement answered
    assert sum(retries for _, retries in results) > 0  # the queue did fill: back-pressure, not loss
    assert len(pool.ids) == len(set(pool.ids)) == episodes * checks  # each job ran once (a retry is never a double)
    assert stats["judgements"] == episodes * checks and stats["max_pending"] == max_pending
    assert stats["judgements_per_hour_per_gpu"] == pytest.approx(8 * 3600 / 0.002)


def test_the_client_waits_out_a_restart_but_not_a_url_that_never_answered() -> None:
    port = _free_port()
    pool = PacedPool()
    never = SandboxClient(f"http://127.0.0.1:{_free_port()}", backoff_s=0.05, retry_s=30)
    started = time.monotonic()
    with pytest.raises(ServiceUnreachableError), never:
        never.health()
    assert time.monotonic() - started < 5  # a typo fails at once, not after retry_s
    client = SandboxClient(f"http://127.0.0.1:{port}", backoff_s=0.05, max_backoff_s=0.2, retry_s=30)
    with serving(pool, port):
        assert client.health()["status"] == "ok"
    restart = serving(pool, port)
    timer = threading.Timer(0.5, restart.__enter__)
    timer.start()
    try:
        verdict = client.judge("examples/relu", SOLUTION)  # the service is down for 0.5 s, then back
    finally:
        timer.join()
        restart.__exit__(None, None, None)
        client.close()
    assert verdict.verdict == "pass" and client.retries > 0


def test_the_queue_is_sized_from_what_the_pool_runs_at_once() -> None:
    assert queue_size({"build": 16, "timing": 4}) == 64 * 20
    assert queue_size({"build": 1, "timing": 1}) == 256  # never below the old fixed size
    from cuda_agent.sandbox.local import LocalPool

    with LocalPool(build_workers=3, cpu_timing_slots=1, spares=0) as pool:
        assert pool.max_pending == queue_size(pool.stats.workers)
        measured = capacity(pool.metrics(), len(pool.slots), pool.max_pending)
    assert measured.judgements == 0 and measured.judgements_per_hour is None  # nothing measured yet
