"""The Ray pool on a local CPU-only Ray: same interface and guarantees as the local pool."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cuda_agent.errors import ConfigError
from cuda_agent.sandbox.jobs import CommandJob
from cuda_agent.sandbox.stats import capacity, queue_size
from tests.sandbox.helpers import good_job

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def pool():
    from cuda_agent.sandbox.ray_pool import RayPool

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with RayPool(cpu_actors=2) as pool:
            yield pool
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_ray_pool_runs_commands_and_judges(pool, tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    command = pool.submit(CommandJob(argv=["bash", "-c", "echo ray; exit 4"], cwd=str(tmp_path)))
    judged = pool.submit(good_job().model_copy(update={"gpu": 1}))  # pinned: CPU actor 1 of [0, 1]
    with pytest.raises(ConfigError, match="asks for GPU 2"):
        pool.submit(good_job().model_copy(update={"gpu": 2}))
    command, judged = command.result(timeout=120), judged.result(timeout=120)
    assert (command.status, command.command.exit_code, command.command.stdout) == ("done", 4, "ray\n")
    assert command.hardening["rlimits"]["RLIMIT_NOFILE"] == 1024
    assert judged.verdict.verdict == "pass", judged.error or judged.verdict.message
    assert pool.slots == [0, 1] and judged.worker.endswith("/cpu-1")
    metrics = pool.metrics()
    assert (metrics.completed, metrics.by_verdict, metrics.workers) == (2, {"pass": 1}, {"cpu": 2})
    measured = capacity(metrics, len(pool.slots), pool.max_pending)  # what GET /stats reports for it
    assert measured.judgements == 1 and measured.judgements_per_hour > 0 and measured.bottleneck == "cpu"
    assert pool.max_pending == queue_size({"cpu": 2})


def test_ray_pool_answers_a_dead_actor_and_recovers(pool, tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    job = CommandJob(argv=["sleep", "60"], cwd=str(tmp_path))
    future = pool.submit(job)
    time.sleep(3.0)
    actor = pool._running[job.id]
    ray.kill(actor, no_restart=False)  # the worker process dies mid-job
    result = future.result(timeout=60)
    assert result.status == "failed" and "Ray worker failed" in result.error
    after = [pool.submit(CommandJob(argv=["true"], cwd=str(tmp_path))) for _ in range(2)]
    assert [f.result(timeout=120).command.exit_code for f in after] == [0, 0]


def test_ray_pool_cancels_a_running_job(pool, tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    job = CommandJob(argv=["sleep", "60"], cwd=str(tmp_path))
    future = pool.submit(job)
    time.sleep(3.0)
    assert pool.cancel(job.id)
    start = time.monotonic()
    assert future.result(timeout=30).status == "cancelled"
    assert time.monotonic() - start < 20
