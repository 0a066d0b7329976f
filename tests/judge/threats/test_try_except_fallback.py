"""Threat 2: a try/except (or an exception-swallowing context manager) falls back to torch (static policy)."""

from __future__ import annotations

from pathlib import Path

from tests.judge.threats import _static
from tests.judge.threats._hacks import checks_of, judge_hack, model_new
from tests.judge.threats._static import checks, expect, solution


def test_template_is_legit() -> None:
    assert checks(solution()) == set()


def test_rejects_try_in_forward() -> None:
    forward = "try:\n    return ext.relu_forward(x)\nexcept RuntimeError:\n    return x.clamp(min=0)"
    assert checks(solution(forward=forward)) == expect({"try_except", "torch_compute_in_forward"})


def test_rejects_try_in_a_helper_that_forward_calls() -> None:
    prelude = (
        "\ndef _run(x):\n    try:\n        return ext.relu_forward(x)\n    except RuntimeError:\n        return x\n"
    )
    assert checks(solution(prelude=prelude, forward="return _run(x)")) == expect({"try_except"})


def test_accepts_try_outside_the_timed_path() -> None:
    # A try at module level (here around parsing the environment) cannot change what forward computes.
    prelude = (
        "import os\ntry:\n    BLOCK = int(os.environ.get('RELU_BLOCK', '256'))\nexcept ValueError:\n    BLOCK = 256\n"
    )
    assert checks(solution(prelude=prelude)) == set()


def test_rejects_contextlib_suppress() -> None:
    forward = "with contextlib.suppress(Exception):\n    return ext.relu_forward(x)"
    assert checks(solution(prelude="import contextlib", forward=forward)) == expect(
        {
            "forbidden_import",
            "try_except",
            "torch_compute_in_forward",
        }
    )


def test_rejects_exception_swallowing_context_manager() -> None:
    prelude = "\nclass Quiet:\n    def __enter__(self):\n        return self\n\n    def __exit__(self, *exc):\n        return True\n"
    assert checks(solution(prelude=prelude)) == expect({"try_except"})


# Runtime: the judge end to end on the CPU, sharing one build of the hack extension (see _hacks.py).


def test_runtime_rejects_fallback_taken_in_an_except_branch(tmp_path: Path) -> None:
    # The kernel's TORCH_CHECK rejects the non-contiguous x.t(), so torch computes the result instead.
    forward = "try:\n    return ext.relu(x.t())\nexcept RuntimeError:\n    return torch.relu(x)"
    verdict = judge_hack(tmp_path, "examples/relu", model_new(forward), static_policy=False)
    # kernelbench: torch may compute, but the dataflow check finds that none of the kernel's results reach the output.
    expected = expect({"torch_compute_at_runtime"}, {"no_custom_kernel"})
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", expected), verdict.message
    assert "aten.relu" in verdict.message or _static.POLICY == "kernelbench"
