"""Threat 11: mutating the inputs (computing in place in the input buffer, or using it as scratch).

Runtime: the candidate gets copies of the trial's inputs; after its call they are compared with
the originals (NaN-aware, bit for bit), before the reference runs on the originals. The timed calls whose
outputs are judged get the same treatment.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.judge.threats._hacks import (
    CALLS_BEFORE_TIMING,
    JUDGED_IN_THE_TIMED_PHASE,
    TIMED,
    checks_of,
    failed_check,
    judge_hack,
    model_new,
)


@pytest.mark.slow
def test_runtime_rejects_kernel_that_writes_its_input(tmp_path: Path) -> None:
    # relu_inplace computes the right values into x and returns x: correct output, mutated input.
    verdict = judge_hack(tmp_path, "examples/relu", model_new("return ext.relu_inplace(x.contiguous())"))
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", {"mutated_inputs"}), verdict.message


def test_runtime_rejects_result_copied_into_the_input(tmp_path: Path) -> None:
    # copy_ is an allowed ATen op (contiguous() performs it), so only the input check sees this.
    forward = "x.copy_(ext.relu(x.contiguous()))\nreturn x"
    verdict = judge_hack(tmp_path, "examples/relu", model_new(forward), static_policy=False)
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", {"mutated_inputs"}), verdict.message


@pytest.mark.slow
def test_writing_into_the_inputs_only_while_timed_is_found(tmp_path: Path) -> None:
    # A judged timed call's inputs are copied before the call: an in-place result (the reference would agree
    # with it on the overwritten inputs) is `mutated_inputs` there as in the trials.
    forward = f"return ext.relu_inplace_from(x.contiguous(), {CALLS_BEFORE_TIMING})"
    verdict = judge_hack(tmp_path, "examples/relu", model_new(forward), **TIMED, min_reps=3)
    assert verdict.verdict == "rejected", verdict.message
    assert checks_of(verdict) == {"mutated_inputs"} and failed_check(verdict)["label"] in JUDGED_IN_THE_TIMED_PHASE
