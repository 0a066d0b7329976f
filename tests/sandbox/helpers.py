"""Shared pieces of the sandbox tests: a good solution and hostile variants that share its build."""

from __future__ import annotations

import time

import psutil

from cuda_agent.sandbox.jobs import JobResult, JudgeJob, make_judge_job
from cuda_agent.subproc import JAIL
from tests.judge.helpers import example_solution, with_forward_body

RELU = example_solution("relu")
FAST = {"time": False, "trials": 2, "robustness_trials": False}


def good_job() -> JudgeJob:
    return make_judge_job(task="examples/relu", solution=RELU, config=FAST)


def hostile_forward(body: str) -> str:
    """The relu solution whose forward does `body` instead (ModelNew only: the build is shared)."""
    return with_forward_body(RELU, body)


def assert_still_judges(pool) -> None:
    result: JobResult = pool.run(good_job())
    assert result.status == "done", result.error
    assert result.verdict.verdict == "pass", result.verdict.message


# It times (so that a local pool's judge stage holds the CPU timing slot, where spares are kept), briefly; judged
# afresh each time.
TIMED = {
    "trials": 2,
    "robustness_trials": False,
    "warmup_reps": 1,
    "min_reps": 3,
    "max_reps": 5,
    "target_phase_s": 0.05,
    "verdict_cache": False,
}
STANDBY = "cuda_agent.judge.child.grader"
"""In the command line of a candidate's standby worker (judge/standby.py)."""


def judge_copy(pool, n: int, **config: object) -> JobResult:
    """Judge the relu solution with distinct bytes (`n`), one build for all; it must pass."""
    result = pool.run(make_judge_job("examples/relu", RELU + f"\n# candidate {n}\n", {**TIMED, **config}))
    assert result.status == "done" and result.verdict is not None, result.error
    assert result.verdict.verdict == "pass", result.verdict.message
    return result


def ours(marker: str) -> list[psutil.Process]:
    """Our descendants whose command line names `marker` (other tests on this machine have their own), but the
    holders of confined processes (jail.py, whose command line names the program they hold: `held`)."""
    found = [(p, " ".join(_cmdline(p))) for p in psutil.Process().children(recursive=True)]
    return [p for p, line in found if marker in line and str(JAIL) not in line]


def held() -> list[psutil.Process]:
    """Our descendants that hold a confined process (jail.py's holder and PID 1)."""
    return [p for p in psutil.Process().children(recursive=True) if str(JAIL) in " ".join(_cmdline(p))]


def spare_standby() -> psutil.Process:
    """The standby of a pool's one spare, once it has started (a spare's standby is our grandchild or deeper)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        workers = ours(STANDBY)
        if workers:
            (worker,) = workers
            return worker
        time.sleep(0.1)
    raise AssertionError("no spare standby started within 60 s")


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []
