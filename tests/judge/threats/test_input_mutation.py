"""Threat 11: mutating the inputs (computing in place in the input buffer, or using it as scratch).

Runtime: the candidate gets copies of the trial's inputs; after its call they are compared with
the originals (NaN-aware, bit for bit), before the reference runs on the originals.
"""

from __future__ import annotations

from pathlib import Path

from tests.judge.threats._hacks import checks_of, judge_hack, model_new


def test_runtime_rejects_kernel_that_writes_its_input(tmp_path: Path) -> None:
    # relu_inplace computes the right values into x and returns x: correct output, mutated input.
    verdict = judge_hack(tmp_path, "examples/relu", model_new("return ext.relu_inplace(x.contiguous())"))
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", {"mutated_inputs"}), verdict.message


def test_runtime_rejects_result_copied_into_the_input(tmp_path: Path) -> None:
    # copy_ is an allowed ATen op (contiguous() performs it), so only the input check sees this.
    forward = "x.copy_(ext.relu(x.contiguous()))\nreturn x"
    verdict = judge_hack(tmp_path, "examples/relu", model_new(forward), static_policy=False)
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", {"mutated_inputs"}), verdict.message
