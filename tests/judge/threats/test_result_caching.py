"""Threat 9: caching results across calls (by shape, pointer or id) instead of computing each call.

Runtime: every call, trials and timed calls alike, draws new inputs under a fresh CSPRNG seed of its own, so a
stored result is wrong and a memo never hits; the last timed output and others drawn at random are judged as a
trial's. None of the hacks below is visible to the static policy.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.judge.child.timed_calls import TIMED_CHECKS
from tests.judge.threats._hacks import (
    CALLS_BEFORE_TIMING,
    JUDGED_IN_THE_TIMED_PHASE,
    TIMED,
    failed_check,
    judge_hack,
    model_new,
)


@pytest.mark.slow
def test_runtime_rejects_result_cached_in_native_code(tmp_path: Path) -> None:
    # relu_cached keeps the first output in a static tensor and returns it for every later shape match.
    verdict = judge_hack(tmp_path, "examples/relu", model_new("return ext.relu_cached(x.contiguous())"))
    assert verdict.verdict == "incorrect", verdict.message
    assert [c["ok"] for c in verdict.checks] == [True, False]
    assert failed_check(verdict)["label"] == "trial"


def test_runtime_rejects_result_cached_on_the_module(tmp_path: Path) -> None:
    forward = "if self.cache is None:\n    self.cache = ext.relu(x.contiguous())\nreturn self.cache"
    verdict = judge_hack(tmp_path, "examples/relu", model_new(forward, init="self.cache = None"))
    assert verdict.verdict == "incorrect", verdict.message
    assert [c["ok"] for c in verdict.checks] == [True, False]


@pytest.mark.slow
def test_no_call_ever_gets_values_it_has_seen_before(tmp_path: Path) -> None:
    # A red-team memo keyed by the inputs' values returned a copy of its stored result on the repeated timed
    # sets (reward 3, 2026-12-05). relu_repeat_wrong answers any repeat with zeros: it passes only if no call,
    # timed ones included, is ever handed values seen before, so no memo can ever hit.
    verdict = judge_hack(tmp_path, "examples/relu", model_new("return ext.relu_repeat_wrong(x.contiguous())"), **TIMED)
    assert verdict.verdict == "pass", verdict.message
    assert [c["label"] for c in verdict.checks].count("timed") >= 2 and verdict.timings_ms.solution > 0


@pytest.mark.slow
def test_returning_the_previous_output_again_is_caught(tmp_path: Path) -> None:
    forward = f"return ext.relu_replay_from(x.contiguous(), {CALLS_BEFORE_TIMING})"
    verdict = judge_hack(tmp_path, "examples/relu", model_new(forward), **TIMED)
    assert (verdict.verdict, verdict.reward) == ("incorrect", -1), verdict.message
    assert failed_check(verdict)["label"] in JUDGED_IN_THE_TIMED_PHASE and verdict.timings_ms.solution is None


def test_skipping_the_work_on_one_timed_call_is_caught(tmp_path: Path) -> None:
    # With min_reps <= TIMED_CHECKS every timed call among the first min_reps is judged (a chance of 1), so
    # skipping the first timed call alone (the last one is honest) fails every time; at the defaults one skipped
    # early call is caught with a chance of 5 in 10 (timed_calls.py: TIMED_CHECKS; timing.late_check_chance).
    assert TIMED_CHECKS >= 3
    forward = f"return ext.relu_skip_at(x.contiguous(), {CALLS_BEFORE_TIMING})"
    verdict = judge_hack(tmp_path, "examples/relu", model_new(forward), **TIMED, min_reps=3)
    assert verdict.verdict == "incorrect", verdict.message
    assert failed_check(verdict)["label"] in JUDGED_IN_THE_TIMED_PHASE


@pytest.mark.slow
def test_an_honest_kernel_passes_the_timed_outputs_check(tmp_path: Path) -> None:
    verdict = judge_hack(tmp_path, "examples/relu", model_new("return ext.relu(x.contiguous())"), time=True)
    assert verdict.verdict == "pass", verdict.message
    assert [c["label"] for c in verdict.checks].count("timed") >= 1 and verdict.timings_ms.solution > 0
