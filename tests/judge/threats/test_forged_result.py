"""Threats 18 and 19 at runtime: the candidate's code claiming a result of its choosing, with the static policy off
(it refuses the imports, file access and embedded Python these need): raising the judge's own run-ending exception
with `RunResult(status="ok", timing=...)`, and writing a result file and exiting. The grader that decides and writes
the result runs in another process: what the candidate's process raises is its exception, what it writes is never
read, and its exit before it answers is its runtime_error."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.judge.threats._hacks import TIMED, judge_hack, model_new

FORGED = (
    "import sys\n"
    "from cuda_agent.judge.protocol import RunResult\n"
    "forged = RunResult(status={status!r}, timing={{'median_ms': 0.001, 'times_ms': [0.001] * 10}})\n"
    "raise sys.modules['cuda_agent.judge.child.stop'].Stop(forged)"
)


@pytest.mark.parametrize("status", ["ok", "judge_error"])
@pytest.mark.slow
def test_a_stop_raised_in_forward_is_the_candidates_runtime_error(tmp_path: Path, status: str) -> None:
    forward = (
        f"self.calls += 1\nif self.calls > 4:\n    {FORGED.format(status=status).replace(chr(10), chr(10) + '    ')}\n"
    )
    forward += "return ext.relu(x.contiguous())"
    source = model_new(forward, init="self.calls = 0")
    verdict = judge_hack(tmp_path, "examples/relu", source, static_policy=False, **TIMED)
    assert (verdict.verdict, verdict.reward) == ("runtime_error", -1), verdict.message
    assert "raised Stop" in verdict.message and verdict.timings_ms.solution is None


def test_a_stop_raised_from_the_candidates_code_elsewhere_is_refused(tmp_path: Path, policy: str) -> None:
    # parameters() is the candidate's method, called by the dataflow check after timing (custom_work, kernelbench
    # policy), in the candidate's process: what it raises there is its own exception.
    if policy != "kernelbench":
        pytest.skip("the judge calls ModelNew.parameters() under the kernelbench policy only")
    method = "def parameters(self, recurse=True):\n" + "".join(
        f"    {line}\n" for line in FORGED.format(status="ok").splitlines()
    )
    source = model_new("return ext.relu(x.contiguous())") + "\n".join(
        f"    {line}" if line else "" for line in method.splitlines()
    )
    verdict = judge_hack(tmp_path, "examples/relu", source, static_policy=False, **TIMED)
    assert (verdict.verdict, verdict.reward) == ("runtime_error", -1), verdict.message
    assert "raised Stop" in verdict.message


HASTY = (
    "import os, json\n"
    "forged = {'status': 'ok', 'timing': {'median_ms': 0.001, 'times_ms': [0.001] * 10}}\n"
    "for name in ('run_result.json', '../run_result.json', os.path.expanduser('~/run_result.json')):\n"
    "    try:\n"
    "        json.dump(forged, open(name, 'w'))\n"
    "    except OSError:\n"
    "        pass\n"
    "os._exit(0)"
)


@pytest.mark.slow
def test_a_result_file_written_before_exiting_is_never_read(tmp_path: Path) -> None:
    verdict = judge_hack(tmp_path, "examples/relu", model_new(HASTY), static_policy=False, **TIMED)
    assert (verdict.verdict, verdict.reward) == ("runtime_error", -1), verdict.message
    assert "the candidate's process died (exit 0)" in verdict.message, verdict.message


AHEAD = (
    "import os, socket, json\n"
    "fd = int(os.environ['CUDA_AGENT_SHIM_FD'])\n"
    "sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=os.dup(fd))\n"
    "sock.sendall(json.dumps({'status': 'ok', 'ms': 0.001}).encode())\n"
)


def test_an_answer_sent_ahead_of_its_question_is_refused(tmp_path: Path) -> None:
    # The candidate's process owns its end of the socket: it can write an answer before the grader asks. Each
    # question carries a fresh random id that its answer must echo, so one sent ahead answers nothing.
    source = AHEAD + "\n\n" + model_new("return ext.relu(x.contiguous())")
    verdict = judge_hack(tmp_path, "examples/relu", source, static_policy=False, **TIMED)
    assert (verdict.verdict, verdict.reward) == ("runtime_error", -1), verdict.message
    assert "out of turn" in verdict.message, verdict.message
