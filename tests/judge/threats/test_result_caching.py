"""Threat 9: caching results across calls (by shape, pointer or id) instead of computing each call.

Runtime: every trial draws new inputs under a new seed into new allocations, so a cached result
is wrong from the second call on. Neither hack below is visible to the static policy.
"""

from __future__ import annotations

from pathlib import Path

from tests.judge.threats._hacks import failed_check, judge_hack, model_new


def test_runtime_rejects_result_cached_in_native_code(tmp_path: Path) -> None:
    # relu_cached keeps the first output in a static tensor and returns it for every later shape match.
    verdict = judge_hack(tmp_path, "examples/relu", model_new("return ext.relu_cached(x.contiguous())"))
    assert verdict.verdict == "incorrect", verdict.message
    assert [c["ok"] for c in verdict.checks] == [True, False]
    assert (failed_check(verdict)["label"], failed_check(verdict)["seed"]) == ("trial", 2002)


def test_runtime_rejects_result_cached_on_the_module(tmp_path: Path) -> None:
    forward = "if self.cache is None:\n    self.cache = ext.relu(x.contiguous())\nreturn self.cache"
    verdict = judge_hack(tmp_path, "examples/relu", model_new(forward, init="self.cache = None"))
    assert verdict.verdict == "incorrect", verdict.message
    assert [c["ok"] for c in verdict.checks] == [True, False]
