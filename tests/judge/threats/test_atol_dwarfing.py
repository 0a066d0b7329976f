"""Threat 14: outputs that pass allclose only because atol dwarfs the values (zeros for a wide softmax).

Runtime: besides elementwise allclose, the normwise error ||out - ref|| / ||ref|| must be at most
norm_rtol (1e-2); zeros have normwise error 1 whatever atol allows elementwise.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.judge.threats._hacks import WIDE_SOFTMAX, failed_check, judge_hack, model_new, task_file


@pytest.mark.slow
def test_runtime_rejects_zeros_for_a_wide_softmax(tmp_path: Path) -> None:
    task = task_file(tmp_path, "wide_softmax", WIDE_SOFTMAX)
    verdict = judge_hack(tmp_path, task, model_new("return ext.softmax_zeros(x.contiguous())"))
    assert verdict.verdict == "incorrect", verdict.message
    assert "normwise" in verdict.message
    figures = failed_check(verdict)["outputs"][0]
    assert figures["mismatch_fraction"] == 0.0  # allclose alone would have passed it
    assert figures["norm_rel_err"] == 1.0
