"""The shared hack extension of the runtime threat tests (`_hacks.py`): no false positives.

Every runtime threat test judges a ModelNew that calls one function of `HACK_CPP`; these tests
show that the same solution calling the legitimate `relu` passes, with and without the static
policy, and that the hack source itself gets past the static policy (so the policy-on runtime
tests exercise the runtime layer, not the static one).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.judge.policy import check_policy
from cuda_agent.judge.solution import SolutionSource
from tests.judge.threats._hacks import judge_hack, model_new, solution

LEGIT = model_new("return ext.relu(x.contiguous())")


def test_hack_source_passes_the_static_policy() -> None:
    assert check_policy(SolutionSource(python=solution(LEGIT)), "cpu") == []


@pytest.mark.parametrize("static_policy", [False, True], ids=["runtime_only", "full_judge"])
def test_runtime_accepts_the_legit_relu_of_the_hack_extension(tmp_path: Path, static_policy: bool) -> None:
    verdict = judge_hack(tmp_path, "examples/relu", LEGIT, static_policy=static_policy)
    assert (verdict.verdict, verdict.correct, verdict.violations) == ("pass", True, []), verdict.message
    labels = [c["label"] for c in verdict.checks]
    assert labels == ["trial"] * 5 + ["robustness"] * 2
    assert all(c["ok"] for c in verdict.checks)
