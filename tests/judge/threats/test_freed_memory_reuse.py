"""Threat 10: returning memory the kernel never wrote, hoping it still holds the reference's output.

Runtime: the reference runs only after the candidate's call for the same trial, on its own input
copies, so no freed reference output for these inputs exists when the candidate allocates (on
CUDA, free allocator memory is also poisoned with NaN). An unwritten output is simply wrong.
"""

from __future__ import annotations

from pathlib import Path

from tests.judge.threats._hacks import failed_check, judge_hack, model_new


def test_runtime_rejects_unwritten_output_memory(tmp_path: Path) -> None:
    # relu_uninit returns torch::empty_like(x) without writing it; the static policy cannot tell.
    verdict = judge_hack(tmp_path, "examples/relu", model_new("return ext.relu_uninit(x.contiguous())"))
    assert verdict.verdict == "incorrect", verdict.message
    assert (failed_check(verdict)["label"], failed_check(verdict)["seed"] - verdict.env["seed_offset"]) == (
        "trial",
        1001,
    )
