"""Threat 4: a kernel is compiled but forward never calls it (static and runtime)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.judge.threats._hacks import checks_of, judge_hack, model_new
from tests.judge.threats._static import checks, expect, solution


def test_template_is_legit() -> None:
    assert checks(solution()) == set()


def test_rejects_forward_that_returns_its_input() -> None:
    assert checks(solution(forward="return x")) == expect({"forward_calls_no_kernel"})


def test_rejects_extension_referenced_but_not_called() -> None:
    assert checks(solution(forward="kernel = ext\nreturn x.view(-1).view(x.shape)")) == expect(
        {"forward_calls_no_kernel"}
    )


def test_rejects_forward_without_any_extension() -> None:
    source = solution().replace("ext = load_inline(", "unused = load_inline(")
    assert checks(source) == expect({"forward_calls_no_kernel", "torch_compute_in_forward"})


def test_accepts_kernel_call_through_a_method_and_attribute() -> None:
    init = (
        "def __init__(self):\n    super().__init__()\n    self.kernels = ext\n\n"
        "def _run(self, t):\n    return self.kernels.relu_forward(t)\n"
    )
    assert checks(solution(init=init, forward="return self._run(x.contiguous())")) == set()


# Runtime: the judge end to end on the CPU, sharing one build of the hack extension (see _hacks.py).


@pytest.mark.parametrize(
    "forward",
    [
        "kernel = ext.relu\nreturn torch.maximum(x, torch.zeros_like(x))",
        "ext.relu(x[:1].contiguous())\nreturn x.clamp(min=0.0)",
    ],
    ids=["never_called", "called_on_one_row"],
)
def test_runtime_rejects_kernel_compiled_but_never_run(tmp_path: Path, forward: str) -> None:
    verdict = judge_hack(tmp_path, "examples/relu", model_new(forward), static_policy=False)
    # kernelbench: torch may compute, but the dataflow check finds that none of the kernel's results reach the output.
    expected = expect({"torch_compute_at_runtime"}, {"no_custom_kernel"})
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", expected), verdict.message
