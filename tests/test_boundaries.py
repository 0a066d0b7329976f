"""Every message between our processes is a typed record, and one that does not fit its record is refused, saying so:
an exception where the sender is ours (ProtocolError), the candidate's runtime_error where the sender is the
candidate's process (judge/DESIGN.md, "Processes started ahead, and what crosses between them")."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
from pydantic import ValidationError

from cuda_agent.errors import ProtocolError
from cuda_agent.judge.child.exchange import Channel
from cuda_agent.judge.protocol import (
    CallQuestion,
    CallSlots,
    InputRef,
    RunResult,
    StandbyOrder,
    TensorRef,
    read_question,
)
from cuda_agent.judge.standby import Standby, _clock
from cuda_agent.sandbox.runner import RunnerOrder, RunnerOutcome
from cuda_agent.subproc import child_env, read_order, read_record
from cuda_agent.synth.filters import FilterRequest, FilterResult


@pytest.mark.parametrize(
    ("kind", "line", "where"),
    [
        (StandbyOrder, '{"args": "--run", "cwd": "/", "env": {}}', "args"),  # pipeline or grader -> a standby
        (RunnerOrder, '["spec.json", "outcome.json"]', "the message"),  # pool -> spare runner (the old list form)
        (FilterRequest, '{"index": 3, "code": "x"}', "result"),  # synthesis pool -> filter worker
    ],
)
def test_an_order_that_is_not_its_record_is_our_protocol_error(kind: type, line: str, where: str) -> None:
    with pytest.raises(ProtocolError) as raised:
        read_order(kind, io.StringIO(line + "\n"))
    assert f"started this one ahead sent what is no {kind.__name__}: {where}" in str(raised.value)
    assert read_order(kind, io.StringIO("")) is None  # the end of stdin: discarded, no error


@pytest.mark.parametrize(
    ("kind", "sender"),
    [
        (RunResult, "the run stage's process"),  # grader -> pipeline (a file)
        (RunnerOutcome, "the stage's runner"),  # runner -> pool (a file)
        (FilterResult, "a synthesis filter worker"),  # filter worker -> synthesis pool (a file)
    ],
)
def test_a_result_that_is_not_its_record_names_its_sender(kind: type, sender: str) -> None:
    with pytest.raises(ProtocolError, match=f"^{sender} sent what is no {kind.__name__}: "):
        read_record(kind, '{"status": 7, "index": "x", "verdict": 1}', sender)
    with pytest.raises(ProtocolError, match="Invalid JSON"):
        read_record(kind, "half a rec", sender)


def test_a_set_up_line_without_a_clock_is_our_protocol_error() -> None:
    # standby child -> its starter, before any candidate code: only our set-up writes these lines.
    assert _clock(b"R12.5") == 12.5
    with pytest.raises(ProtocolError, match="during its set-up"):
        _clock(b"Rsoon")


def test_a_question_of_the_grader_crosses_as_its_record_and_a_malformed_one_is_refused() -> None:
    # grader -> candidate's process: built as records (the grader cannot build a malformed one)...
    with pytest.raises(ValidationError):
        CallQuestion(calls=[CallSlots(inputs=[InputRef(tensor=TensorRef(buffer=-1, shape=(2,), dtype="float32"))])])
    question = CallQuestion(id=41, calls=[CallSlots(inputs=[InputRef(value=math.inf), InputRef(value=3)])], trace=True)
    ours, theirs = Channel.pair()
    peer = Channel(theirs)
    try:
        ours.send(question)
        data, fds = peer.receive_data(timeout_s=5)
    finally:
        ours.close()
        peer.close()
    assert fds == [] and read_question(data) == question  # an infinite plain input crosses as itself, 3 stays an int
    # ...and what is no question (a bug of ours, another version of the grader) is refused, naming what did not fit.
    bad = json.loads(data)
    bad["calls"][0]["inputs"] = [{"tensor": {"buffer": -1, "shape": [2], "dtype": "float32"}}]
    with pytest.raises(ProtocolError, match="call.calls.0.inputs.0.tensor.buffer"):
        read_question(json.dumps(bad).encode())
    with pytest.raises(ProtocolError, match="no question"):
        read_question(b'{"op": "exec", "code": "print()"}')
    with pytest.raises(ProtocolError, match="no question"):
        read_question(b"\xff not JSON")


def test_a_standby_handed_what_is_no_order_ends_saying_so(tmp_path: Path) -> None:
    standby = Standby("tests.judge.standby_child", child_env())
    try:
        assert standby.wait_ready(60) is None
        assert standby.proc.stdin is not None
        standby.proc.stdin.write(b'{"args": ["1", "0", "out.json"], "cwd": 5}\n')  # what no go() writes
        standby.proc.stdin.close()
        assert standby.proc.wait(timeout=30) != 0
        said = standby.stderr_tail(4000)
    finally:
        standby.close()
    assert "ProtocolError" in said and "no StandbyOrder: cwd" in said, said


@pytest.mark.slow
def test_a_candidates_process_that_answers_what_no_honest_one_does_is_its_runtime_error(tmp_path: Path) -> None:
    # candidate's process -> grader: its answers are claims; one that is no record is the candidate's verdict.
    from tests.judge.threats._hacks import judge_hack, model_new

    forge = (
        "import json, sys\n"
        "channel = sys.modules['cuda_agent.judge.child.exchange'].Channel\n"
        "channel.send = lambda self, message, fds=None, ident=None: self.sock.sendall(\n"
        "    json.dumps({'status': 'passed', 'ms': -1, 'id': ident}).encode())"
    )
    verdict = judge_hack(tmp_path, "examples/relu", model_new("return ext.relu(x)", init=forge), static_policy=False)
    assert (verdict.verdict, verdict.reward) == ("runtime_error", -1), verdict.message
    assert "answered what no honest one does" in verdict.message
