"""Threats 9, 11 and 13 while timed, with every randomly chosen timed output screened at sampled positions first
(`screen_min_elems=1`; by default only outputs of 4 Mi elements and more are): each hack is still caught, through
the full comparison that the screen's doubt sends it to, and an honest kernel passes on screened checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.judge.child.trial import SCREEN_POSITIONS
from tests.judge.threats._hacks import (
    CALLS_BEFORE_TIMING,
    JUDGED_IN_THE_TIMED_PHASE,
    ROUND10_WHEN_TIMED,
    TIMED,
    checks_of,
    failed_check,
    judge_hack,
    model_new,
)

SCREENED = {**TIMED, "screen_min_elems": 1}


@pytest.mark.slow
def test_an_honest_kernel_passes_on_screened_timed_outputs(tmp_path: Path) -> None:
    verdict = judge_hack(tmp_path, "examples/relu", model_new("return ext.relu(x.contiguous())"), **SCREENED)
    assert verdict.verdict == "pass", verdict.message
    timed = [c for c in verdict.checks if c["label"] == "timed"]
    screened = [c for c in timed if c.get("screened") == SCREEN_POSITIONS]
    assert screened and all(c["ok"] for c in timed)
    assert "screened" not in timed[-1]  # the last call's output is judged on every element


def test_skipping_the_work_on_one_timed_call_is_caught_through_the_screen(tmp_path: Path) -> None:
    forward = f"return ext.relu_skip_at(x.contiguous(), {CALLS_BEFORE_TIMING})"
    verdict = judge_hack(tmp_path, "examples/relu", model_new(forward), **SCREENED, min_reps=3)
    assert verdict.verdict == "incorrect", verdict.message
    # The call it skips is the first timed one, or the watched call placed just before it (a trial among the timed
    # calls, child/watched_calls.py): judged in full either way.
    assert failed_check(verdict)["label"] in JUDGED_IN_THE_TIMED_PHASE and "screened" not in failed_check(verdict)


@pytest.mark.slow
def test_writing_into_the_inputs_while_timed_is_caught_through_the_screen(tmp_path: Path) -> None:
    forward = f"return ext.relu_inplace_from(x.contiguous(), {CALLS_BEFORE_TIMING})"
    verdict = judge_hack(tmp_path, "examples/relu", model_new(forward), **SCREENED, min_reps=3)
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", {"mutated_inputs"}), verdict.message


@pytest.mark.slow
def test_precision_lost_only_while_timed_is_caught_through_the_screen(tmp_path: Path) -> None:
    verdict = judge_hack(tmp_path, "examples/relu", ROUND10_WHEN_TIMED, **SCREENED)
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", {"reduced_precision"}), verdict.message
