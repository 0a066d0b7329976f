"""A Ray actor's judge-stage runner started ahead, with its standby (sandbox/spare.py), as LocalPool keeps one."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from tests.sandbox.helpers import STANDBY, judge_copy, ours, spare_standby

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray of 2 CPUs: room for two one-actor pools (the module test_ray_pool.py holds both with its own)."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def _same(verdict) -> tuple:
    """What two judgements of one candidate agree on (timings and so the speed-up and reward vary, and each
    judgement draws its own input seeds: its checks agree less the seed). Which timed calls are judged is drawn at
    random after each returns (timed_calls.py's `TimedCalls`), so the `timed` checks differ in number: each passed, as
    the verdict's `pass` says, and they are left out of the comparison."""
    checks = [{k: v for k, v in check.items() if k != "seed"} for check in verdict.checks if check["label"] != "timed"]
    return verdict.verdict, verdict.correct, checks, verdict.violations, verdict.policy, verdict.device


@pytest.mark.slow
def test_an_actor_hands_each_judgement_after_its_first_a_spare_and_the_verdicts_stay(local_ray) -> None:
    from cuda_agent.sandbox.ray_pool import RayPool

    with RayPool(cpu_actors=1, spares=0) as plain:
        alone = [judge_copy(plain, n).verdict for n in range(3)]
        assert ours(STANDBY) == []  # nothing kept ahead between judgements
    with RayPool(cpu_actors=1, spares=1) as pool:
        first = judge_copy(pool, 0).verdict
        spare = spare_standby()  # started when the first job's judge stage took its turn
        second = judge_copy(pool, 1).verdict
        assert not spare.is_running()  # used by the second job, then ended with it
        third = judge_copy(pool, 2).verdict
    assert [v.env["standby_worker"] for v in alone] == ["started ahead"] * 3
    assert [v.env["standby_worker"] for v in (first, second, third)] == [
        "started ahead",
        "spare started ahead",
        "spare started ahead",
    ]
    assert all("standby_spare_discarded" not in v.env for v in (first, second, third))
    assert [_same(v) for v in (first, second, third)] == [_same(v) for v in alone]


@pytest.mark.slow
def test_a_ray_actor_started_for_another_config_replaces_its_spare(local_ray) -> None:
    from cuda_agent.sandbox.ray_pool import RayPool

    with RayPool(cpu_actors=1, spares=1) as pool:
        judge_copy(pool, 0, cpu_threads=1)  # the spare it leaves is started as a one-thread judgement's would be
        spare_standby()
        other = judge_copy(pool, 1, cpu_threads=2).verdict
        again = judge_copy(pool, 2, cpu_threads=2).verdict  # the replacement was started for two threads
    assert other.env["standby_worker"] == "started ahead"
    assert other.env["standby_spare_discarded"] == "it was started otherwise: env MKL_NUM_THREADS, env OMP_NUM_THREADS"
    assert again.env["standby_worker"] == "spare started ahead"


@pytest.mark.slow
def test_closing_the_ray_pool_closes_its_actors_spares(local_ray) -> None:
    from cuda_agent.sandbox.ray_pool import RayPool

    pool = RayPool(cpu_actors=1, spares=1)
    try:
        judge_copy(pool, 0)
        standby, *runners = [spare_standby(), *ours("--spare")]
        folders = [Path(r.cmdline()[-1]).parent for r in runners]  # --spare FOLDER/spare.json
    finally:
        pool.close()
    spares = [standby, *runners]
    assert len(runners) == 1  # the actor's one spare runner, and its standby
    _, alive = psutil.wait_procs(spares, timeout=5)
    assert alive == [] and ours(STANDBY) == [] and ours("--spare") == []
    # Closed by its actor, not left to die with it: a killed actor's spare would leave its folder behind.
    assert folders[0].name.startswith("cuda-agent-spare-") and not folders[0].exists()
