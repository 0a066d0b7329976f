"""One judgement, three ways to ask for it: LocalPool, RayPool and the HTTP client give the same typed answers.

A candidate's outcome is a `Verdict` on every path; a failure of ours is the same exception class on every
path (here the judge's own out-of-memory in its comparison: JudgeInfraError), never a verdict or a reward.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from cuda_agent.errors import InfraError, JudgeInfraError
from cuda_agent.sandbox.client import SandboxClient
from cuda_agent.sandbox.local import LocalPool
from tests.judge.helpers import hungry_reference
from tests.sandbox.helpers import FAST, RELU
from tests.sandbox.test_service import free_port, wait_for

ray = pytest.importorskip("ray")

FRESH = {**FAST, "verdict_cache": False}  # each path judges for real
SAME = {"task", "verdict", "reward", "correct", "violations", "device", "timings_ms", "policy"}


@pytest.fixture(scope="module")
def client():
    port = free_port()
    cmd = [sys.executable, "-m", "cuda_agent", "serve", "--port", str(port), "--workers", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(url, proc)
        with SandboxClient(url) as client:
            yield client
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def ray_pool():
    from cuda_agent.sandbox.ray_pool import RayPool

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with RayPool(cpu_actors=1) as pool:
            yield pool
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_local_ray_and_http_give_the_same_verdict_and_the_same_error(client, ray_pool) -> None:
    with LocalPool(build_workers=1) as local:
        judges = {"local": local, "ray": ray_pool, "http": client}
        verdicts = {name: j.judge("examples/relu", RELU, FRESH) for name, j in judges.items()}
        errors = {}
        for name, j in judges.items():
            with pytest.raises(InfraError) as caught:
                j.judge(hungry_reference(), RELU, FRESH)
            errors[name] = caught.value
    dumps = {name: v.model_dump(include=SAME) for name, v in verdicts.items()}
    assert dumps["local"]["verdict"] == "pass" and dumps["local"] == dumps["ray"] == dumps["http"]
    assert all(type(e) is JudgeInfraError for e in errors.values()), errors
    assert all("can't allocate memory" in str(e) for e in errors.values()), errors
    counted = [pool.metrics().by_error for pool in (local, ray_pool, client)]  # dropped, and counted by each pool
    assert counted == [{"JudgeInfraError": 1}] * 3


@pytest.mark.slow
def test_a_verdict_names_the_task_it_was_asked_for_on_every_path(client, ray_pool, tmp_path) -> None:
    from cuda_agent.tasks import Catalog
    from tests.judge.helpers import example_solution

    task = Catalog().resolve("examples/linear_gelu")  # travels as its source; the verdict keeps its name
    with LocalPool(build_workers=1) as local:
        judges = {"local": local, "ray": ray_pool, "http": client}
        named = {name: j.judge(task, example_solution("linear_gelu"), FAST).task for name, j in judges.items()}
    assert named == dict.fromkeys(judges, "examples/linear_gelu")
