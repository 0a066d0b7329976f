"""Threat 24: answers of a shape the grader's readers cannot take. The candidate's process writes what it likes on
its socket; whatever that is, it must be the candidate's verdict (-1), never a failure of ours (an infrastructure
error has no reward, so a wrong solution that could cause one would escape its -1).

Round 12 of the internal red team (bench/results/cpu-2026-12-07-redteam-12/): a packet of 200,000 `[` made the
grader's JSON reader raise RecursionError, which it did not take for a malformed answer (a judge error instead of
the candidate's runtime_error); a claim of its import's answer kept for the verdict, a list nested 900 deep, would
have stopped the grader writing its result. Answers are now read as malformed on any parser failure, and every claim
that reaches the verdict is typed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from cuda_agent.judge.protocol import CallAnswer, LoadAnswer, RunResult
from tests.judge.threats import _static
from tests.judge.threats._hacks import judge_hack, model_new

DEEP = 900
"""Within what a JSON reader takes from a shallow stack, past what pydantic's JSON writer takes."""


def test_claims_that_reach_the_verdict_take_no_other_shape() -> None:
    nested: list = []
    for _ in range(DEEP):
        nested = [nested]
    with pytest.raises(ValidationError):
        LoadAnswer.model_validate({"status": "ok", "env": {"triton": nested}})
    with pytest.raises(ValidationError):
        LoadAnswer.model_validate({"status": "ok", "env": {"anything": 1}})
    with pytest.raises(ValidationError):
        CallAnswer.model_validate({"status": "ok", "changed_flags": {"default_dtype": [nested, None]}})
    honest = LoadAnswer(status="ok", env={"triton": "3.4.0", "triton_interpret": True})
    result = RunResult(status="ok", env=honest.env.model_dump(exclude_none=True))
    assert RunResult.model_validate_json(result.model_dump_json()).env == {"triton": "3.4.0", "triton_interpret": True}


# forward's first call writes a packet nested past the JSON reader's stack on the socket, then answers zeros.
NESTED_PACKET = """
import os, socket
from cuda_agent.judge.child.shim import SOCKET_FD_ENV
if not self.sent:
    self.sent = True
    fd = os.dup(int(os.environ[SOCKET_FD_ENV]))
    socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=fd).send(bytes([91]) * 200_000)
return torch.zeros_like(x)
"""

# __init__ rewrites how its import's answer is written (the shim sends it once __init__ returns): a Triton claim
# nested DEEP lists deep.
DEEP_IMPORT_CLAIM = f"""
import json
from pydantic import BaseModel
from cuda_agent.judge.protocol import LoadAnswer
deep = json.loads(bytes([91]) * {DEEP} + bytes([93]) * {DEEP})
LoadAnswer.model_dump = lambda answer, **how: {{**BaseModel.model_dump(answer), **dict(env=dict(triton=deep))}}
"""


ONE_TRIAL = {"static_policy": False, "trials": 1, "robustness_trials": False}


@pytest.mark.slow
def test_runtime_answers_no_reader_of_ours_takes_are_the_candidates_runtime_error(tmp_path: Path) -> None:
    if _static.POLICY == "kernelbench":
        pytest.skip("what crosses the socket is the same under both policies")
    nested = judge_hack(tmp_path, "examples/relu", model_new(NESTED_PACKET, "self.sent = False"), **ONE_TRIAL)
    assert (nested.verdict, nested.reward) == ("runtime_error", -1), nested.message
    assert "RecursionError" in nested.message
    deep = judge_hack(
        tmp_path, "examples/relu", model_new("return torch.zeros_like(x)", DEEP_IMPORT_CLAIM), **ONE_TRIAL
    )
    assert (deep.verdict, deep.reward) == ("runtime_error", -1), deep.message
    assert "answered what no honest one does" in deep.message
