"""Threat 9: caching results across calls (by shape, pointer or id) instead of computing each call.

Runtime: every trial draws new inputs under a new seed into new allocations, so a cached result
is wrong from the second call on. Timed calls repeat their input sets: there a call that returns its previous
output's storage is `result_caching`, and each set's last timed output is judged as a trial's (a red-team run,
2026-12-05, passed both with reward 3 before). None of the hacks below is visible to the static policy.
"""

from __future__ import annotations

from pathlib import Path

from tests.judge.threats._hacks import checks_of, failed_check, judge_hack, model_new


def test_runtime_rejects_result_cached_in_native_code(tmp_path: Path) -> None:
    # relu_cached keeps the first output in a static tensor and returns it for every later shape match.
    verdict = judge_hack(tmp_path, "examples/relu", model_new("return ext.relu_cached(x.contiguous())"))
    assert verdict.verdict == "incorrect", verdict.message
    assert [c["ok"] for c in verdict.checks] == [True, False]
    assert (failed_check(verdict)["label"], failed_check(verdict)["seed"] - verdict.env["seed_offset"]) == (
        "trial",
        2002,
    )


def test_runtime_rejects_result_cached_on_the_module(tmp_path: Path) -> None:
    forward = "if self.cache is None:\n    self.cache = ext.relu(x.contiguous())\nreturn self.cache"
    verdict = judge_hack(tmp_path, "examples/relu", model_new(forward, init="self.cache = None"))
    assert verdict.verdict == "incorrect", verdict.message
    assert [c["ok"] for c in verdict.checks] == [True, False]


def test_a_result_stored_by_input_address_is_found_in_the_timed_calls(tmp_path: Path) -> None:
    # relu_memo computes honestly on every new input set (all trials pass) and returns its stored tensor when a
    # set comes again, as the timed calls' sets do.
    verdict = judge_hack(tmp_path, "examples/relu", model_new("return ext.relu_memo(x.contiguous())"), time=True)
    assert verdict.verdict == "rejected", verdict.message
    assert checks_of(verdict) == {"result_caching"}
    assert all(c["ok"] for c in verdict.checks) and verdict.timings_ms.solution is None


def test_skipping_the_work_on_a_repeated_input_set_fails_the_timed_outputs_check(tmp_path: Path) -> None:
    # relu_seen_uninit computes on a new set and returns fresh unwritten memory on a repeated one: no stored
    # storage, but the timed outputs are wrong.
    verdict = judge_hack(tmp_path, "examples/relu", model_new("return ext.relu_seen_uninit(x.contiguous())"), time=True)
    assert verdict.verdict == "incorrect", verdict.message
    assert failed_check(verdict)["label"] == "timed" and "timed call" in verdict.message


def test_an_honest_kernel_passes_the_timed_outputs_check(tmp_path: Path) -> None:
    verdict = judge_hack(tmp_path, "examples/relu", model_new("return ext.relu(x.contiguous())"), time=True)
    assert verdict.verdict == "pass", verdict.message
    assert [c["label"] for c in verdict.checks].count("timed") >= 1 and verdict.timings_ms.solution > 0
