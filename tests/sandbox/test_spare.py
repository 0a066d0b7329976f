"""A timing worker's judge-stage runner started ahead, with its standby (sandbox/spare.py), through LocalPool."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import time
from pathlib import Path
from uuid import uuid4

import psutil
import pytest

from cuda_agent.sandbox.jobs import make_judge_job
from cuda_agent.sandbox.local import LocalPool
from tests.judge.helpers import with_forward_body
from tests.sandbox.helpers import RELU, STANDBY, TIMED, held, judge_copy, ours, spare_standby

BUILD_STANDBY = "cuda_agent.judge.build --standby"
"""In the command line of a build's importing child started ahead (judge/build.py)."""


@pytest.mark.slow
def test_each_job_after_the_first_takes_a_spare_of_its_own() -> None:
    with LocalPool(build_workers=1, spares=1) as pool:
        first = judge_copy(pool, 0)
        spare = spare_standby()  # started when the first job took its timing slot
        second = judge_copy(pool, 1)
        assert not spare.is_running()  # used by the second job, then ended with it
        third = judge_copy(pool, 2)
    origins = [r.verdict.env["standby_worker"] for r in (first, second, third)]
    assert origins == ["started ahead", "spare started ahead", "spare started ahead"]
    assert all("standby_spare_discarded" not in r.verdict.env for r in (first, second, third))
    # Where the pool's seconds went, beside the judge's own: each stage's runner, and the part outside the judge.
    for result in (first, second, third):
        stage = result.verdict.stage_s
        assert stage["sandbox.judge"] >= stage["run"] and stage["sandbox.prepare"] > stage["sandbox.prepare.runner"]
        assert 0 <= stage["sandbox.judge.runner"] < stage["sandbox.judge"] and stage["sandbox.slot_wait"] >= 0
        assert stage["sandbox.prepare"] + stage["sandbox.judge"] <= result.run_s + 0.05


def test_closing_the_pool_leaves_no_spare_process() -> None:
    pool = LocalPool(build_workers=1, spares=1)
    judge_copy(pool, 0)
    spares = [spare_standby(), *ours("--spare")]
    assert len(spares) == 2  # its runner and that runner's standby
    pool.close()
    gone, alive = psutil.wait_procs(spares, timeout=5)
    assert alive == [] and ours(STANDBY) == [] and ours("--spare") == [] and held() == []


@pytest.mark.slow
def test_a_spare_started_for_another_config_is_discarded() -> None:
    with LocalPool(build_workers=1, spares=1) as pool:
        judge_copy(pool, 0, cpu_threads=1)  # the spare it leaves is started as a one-thread judgement's would be
        spare_standby()
        other = judge_copy(pool, 1, cpu_threads=2).verdict
    assert other.env["standby_worker"] == "started ahead"
    assert other.env["standby_spare_discarded"] == "it was started otherwise: env MKL_NUM_THREADS, env OMP_NUM_THREADS"


@pytest.mark.slow
def test_a_spare_whose_standby_died_is_replaced_not_used() -> None:
    with LocalPool(build_workers=1, spares=1) as pool:
        judge_copy(pool, 0)
        worker = spare_standby()
        os.killpg(os.getpgid(worker.pid), signal.SIGKILL)  # its own process group (standby.py starts a new session)
        psutil.wait_procs([worker], timeout=5)
        replaced = judge_copy(pool, 1).verdict
    assert replaced.env["standby_worker"] == "started ahead"
    assert replaced.env["standby_spare_discarded"] == "it had exited (-9)"


@pytest.mark.slow
def test_a_spare_waits_on_the_build_cores_and_its_candidate_runs_on_the_timing_cores() -> None:
    # The candidate runs as another user (not tmp_path), with a /tmp of its own (jail.private_folders): /dev/shm.
    with tempfile.TemporaryDirectory(prefix="spare-test-", dir="/dev/shm") as folder:
        Path(folder).chmod(0o755)
        seen = Path(folder, "cores.txt")
        seen.touch(mode=0o666)  # ours, for the candidate to write into: what it makes itself is swept with its id
        seen.chmod(0o666)
        _spare_cores(seen)


def _spare_cores(seen: Path) -> None:
    cores = "sorted(__import__('os').sched_getaffinity(0))"
    forward = with_forward_body(RELU, f"open({str(seen)!r}, 'w').write(repr({cores}))\nreturn relu_ext.relu_forward(x)")
    with LocalPool(build_workers=1, spares=1, pin_cpus=True, cores_per_timing=1) as pool:
        build, (timing,) = pool.cpu_plan.build, pool.cpu_plan.timing
        assert build and timing and set(build).isdisjoint(timing)
        judge_copy(pool, 0)
        assert spare_standby().cpu_affinity() == build  # its imports stay off the timing core
        job = make_judge_job("examples/relu", forward, {**TIMED, "static_policy": False})
        result = pool.run(job)
    assert result.verdict is not None and result.verdict.env["standby_worker"] == "spare started ahead"
    assert result.hardening["cpus"] == timing and seen.read_text() == repr(timing)


@pytest.mark.slow
def test_a_spare_runner_started_with_another_environment_is_not_handed_the_job(monkeypatch) -> None:
    with LocalPool(build_workers=1, spares=1) as pool:
        judge_copy(pool, 0)
        spare = spare_standby()
        monkeypatch.setenv("CUDA_AGENT_CACHE_NOTE", "changed")  # a later runner would start with this too
        fresh = judge_copy(pool, 1).verdict
        _, alive = psutil.wait_procs([spare], timeout=15)  # closed, unused (after the job was answered)
        assert alive == []
    assert fresh.env["standby_worker"] == "started ahead" and "standby_spare_discarded" not in fresh.env


def test_a_correctness_only_judgement_on_the_cpu_takes_a_build_workers_spare() -> None:
    # `utils.verification` through `cuda-agent serve` on the CPU: no timing slot, so the judge stage runs on a build
    # worker, which started a fresh runner and standby for every such job (3.5 s against 2.8 s in-process).
    with LocalPool(build_workers=1, spares=1) as pool:
        first = judge_copy(pool, 0, time=False)
        spare = spare_standby()  # started when the first job took a build worker's spares
        second = judge_copy(pool, 1, time=False)
        assert not spare.is_running()  # used by the second job, then ended with it
        leftover = [spare_standby(), *ours("--spare")]
    assert [r.verdict.env["standby_worker"] for r in (first, second)] == ["started ahead", "spare started ahead"]
    assert "run.timing" not in second.verdict.stage_s and second.worker == "build-0"  # no timing slot held
    _, alive = psutil.wait_procs(leftover, timeout=5)
    assert alive == [] and ours(STANDBY) == [] and held() == []  # the pool closed its build workers' spare too


@pytest.mark.slow
def test_a_prepare_stage_takes_a_spare_whose_build_child_builds_the_candidate() -> None:
    # The build workers' prepare spares hold the build's importing child, torch imported (judge/build.py --standby).
    def distinct_build(n: int) -> str:  # new bytes in the C++ source: a build of its own
        return RELU.replace("#include <torch/extension.h>", f"#include <torch/extension.h>\n// build {n} {uuid4()}")

    with LocalPool(build_workers=1, spares=1, prepare_spares=1) as pool:
        first = pool.run(make_judge_job("examples/relu", distinct_build(1), TIMED))
        builder = _one(BUILD_STANDBY)  # the replacement started when the first prepare stage ran
        future = pool.submit(make_judge_job("examples/relu", distinct_build(2), TIMED))
        compilers: set[str] = set()
        while not future.done():  # the second candidate's compiler runs under the spare's child
            with contextlib.suppress(psutil.Error):
                compilers |= {c.name() for c in builder.children(recursive=True)} & {"ninja", "c++", "g++", "cc1plus"}
            time.sleep(0.05)
        second = future.result()
        assert compilers, "the spare's build child never compiled"
        assert not builder.is_running()  # it built the second candidate, then ended with its stage
        assert _one(BUILD_STANDBY).pid != builder.pid  # and was replaced
    for result in (first, second):
        assert result.status == "done" and result.verdict.verdict == "pass", result.error or result.verdict.message
        assert result.verdict.env["build_cached"] is True  # the judge stage found the prepare stage's build
    assert ours(BUILD_STANDBY) == [] and ours("--spare") == [] and held() == []


def _one(marker: str) -> psutil.Process:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = ours(marker)
        if found:
            (process,) = found
            return process
        time.sleep(0.1)
    raise AssertionError(f"no {marker} process within 60 s")
