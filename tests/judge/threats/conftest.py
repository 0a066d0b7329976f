"""Every threat test runs under both policies: a hack must fail under kernelbench as it does under cuda-agent."""

from __future__ import annotations

import pytest

from cuda_agent.judge.policy import POLICIES
from tests.judge.threats import _static


@pytest.fixture(params=POLICIES, autouse=True)
def policy(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The policy of this run of the test; `_static.checks`, `_static.expect` and `_hacks.judge_hack` follow it."""
    monkeypatch.setattr(_static, "POLICY", request.param)
    return request.param
