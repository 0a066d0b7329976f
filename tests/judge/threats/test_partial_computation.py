"""Threat 12: partial computation, shape hard-coding, exploiting the input distribution.

Runtime: outputs are compared in full; after the seeded trials, robustness trials run the same
inputs sign-flipped (`negate`) and stretched (`3x - 1`), so a kernel that is right only on the
task's own distribution fails one of them (label 'robustness').
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.judge.threats._hacks import RELU_NON_NEGATIVE, failed_check, judge_hack, model_new, task_file


def test_runtime_rejects_kernel_that_computes_only_the_first_rows(tmp_path: Path) -> None:
    # relu_first_rows hard-codes 64 rows of 1024 and zero-fills the rest of the 128-row output.
    verdict = judge_hack(tmp_path, "examples/relu", model_new("return ext.relu_first_rows(x.contiguous())"))
    assert verdict.verdict == "incorrect", verdict.message
    assert failed_check(verdict)["label"] == "trial"


@pytest.mark.slow
def test_runtime_rejects_kernel_correct_only_within_the_drawn_range(tmp_path: Path) -> None:
    # relu_clip8 saturates at 8, which randn() never reaches: every seeded trial passes, the stretch fails.
    verdict = judge_hack(tmp_path, "examples/relu", model_new("return ext.relu_clip8(x.contiguous())"))
    assert verdict.verdict == "incorrect", verdict.message
    assert [c["label"] for c in verdict.checks if c["ok"]] == ["trial"] * 5 + ["robustness"]
    assert (failed_check(verdict)["label"], failed_check(verdict)["transform"]) == ("robustness", "stretch")


@pytest.mark.slow
def test_runtime_rejects_kernel_correct_only_for_non_negative_inputs(tmp_path: Path) -> None:
    # On a task whose inputs are drawn from [0, 1), a copy of the input is the ReLU; negated inputs expose it.
    task = task_file(tmp_path, "relu_non_negative", RELU_NON_NEGATIVE)
    verdict = judge_hack(tmp_path, task, model_new("return ext.relu_copy(x.contiguous())"))
    assert verdict.verdict == "incorrect", verdict.message
    assert [c["label"] for c in verdict.checks if c["ok"]] == ["trial"] * 5
    assert (failed_check(verdict)["label"], failed_check(verdict)["transform"]) == ("robustness", "negate")
