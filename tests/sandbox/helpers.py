"""Shared pieces of the sandbox tests: a good solution and hostile variants that share its build."""

from __future__ import annotations

from cuda_agent.sandbox.jobs import JobResult, JudgeJob, make_judge_job
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
