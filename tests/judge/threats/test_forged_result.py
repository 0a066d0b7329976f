"""Threat 18 at runtime: the candidate's code claiming a result of its choosing, with the static policy off (it
refuses the imports, file access and embedded Python these need). Red-team probes, 2026-12-06, both reward 3 before:
raising the worker's own run-ending exception with `RunResult(status="ok", timing=...)` from forward, and writing
the result file from forward and exiting. Its process is the worker's, so it can reach both."""

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
    # parameters() is the candidate's method, called by the judge's own code after timing (custom_work, kernelbench
    # policy): no candidate call wraps it, so the run's last defence refuses a Stop claiming success.
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
    assert "claiming 'ok'" in verdict.message


HASTY = (
    "import sys, os, json\n"
    "f = sys._getframe()\n"
    "while f is not None and not (f.f_code.co_name == 'main' and 'argv' in f.f_locals):\n"
    "    f = f.f_back\n"
    "forged = {'status': 'ok', 'timing': {'median_ms': 0.001, 'times_ms': [0.001] * 10}}\n"
    "json.dump(forged, open(f.f_locals['argv'][1], 'w'))\n"
    "os._exit(0)"
)


def test_a_result_file_claiming_success_without_its_checks_is_refused(tmp_path: Path) -> None:
    verdict = judge_hack(tmp_path, "examples/relu", model_new(HASTY), static_policy=False, **TIMED)
    assert (verdict.verdict, verdict.reward) == ("runtime_error", -1), verdict.message
    assert "claims success without 5 passed trials" in verdict.message
