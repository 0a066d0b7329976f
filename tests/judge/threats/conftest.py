"""Every threat test runs under both policies: a hack must fail under kernelbench as it does under cuda-agent.

Under kernelbench they are in the slow group (README's `-m slow`, CI's second step): the default run judges every
threat once, under the policy RL trains with."""

from __future__ import annotations

import pytest

from cuda_agent.judge.policy import POLICIES
from tests.judge.threats import _static


@pytest.fixture(
    params=[pytest.param(p, marks=pytest.mark.slow) if p == "kernelbench" else p for p in POLICIES], autouse=True
)
def policy(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The policy of this run of the test; `_static.checks`, `_static.expect` and `_hacks.judge_hack` follow it."""
    monkeypatch.setattr(_static, "POLICY", request.param)
    return request.param
