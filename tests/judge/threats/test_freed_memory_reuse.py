"""Threat 10: returning memory the kernel never wrote, hoping it still holds the reference's output.

Runtime: the reference runs in the grader's process, never in the candidate's, so no memory the candidate can
allocate ever held its output. An unwritten output is simply wrong.
"""

from __future__ import annotations

from pathlib import Path

from tests.judge.threats._hacks import failed_check, judge_hack, model_new


def test_runtime_rejects_unwritten_output_memory(tmp_path: Path) -> None:
    # relu_uninit returns torch::empty_like(x) without writing it; the static policy cannot tell.
    verdict = judge_hack(tmp_path, "examples/relu", model_new("return ext.relu_uninit(x.contiguous())"))
    assert verdict.verdict == "incorrect", verdict.message
    assert failed_check(verdict)["label"] == "trial"
