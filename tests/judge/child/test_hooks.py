"""hooks.OperatorWatch and profiled_ops in this process (the judge's use of them: tests/judge/threats)."""

from __future__ import annotations

import pytest
import torch

from cuda_agent.judge.child.hooks import OperatorWatch, profiled_ops


def test_profiled_ops_names_composite_operators_and_those_they_call() -> None:
    x = torch.randn(8)
    result, ops = profiled_ops(torch, lambda: torch.allclose(x, x + 1))
    assert result is False
    assert ops is not None and {"aten::allclose", "aten::isclose", "aten::add"} <= ops


def test_profiled_ops_keeps_the_works_error() -> None:
    def fails() -> None:
        raise ValueError("ours")

    with pytest.raises(ValueError, match="ours"):
        profiled_ops(torch, fails)
    _, ops = profiled_ops(torch, lambda: torch.ones(2).sum())  # the profiler was closed: it opens again
    assert ops is not None and "aten::sum" in ops


def test_a_known_read_covers_the_known_operators_and_a_whole_read_every_one() -> None:
    watch = OperatorWatch(torch, {"aten::erf"})
    lib = torch.library.Library("aten", "IMPL")
    try:
        lib.impl("erfinv", lambda t: t, "CPU")
        assert watch.overridden(known=True) == []  # erfinv is not known: a light read does not look at it
        assert watch.overridden() == ["aten::erfinv"]
        assert watch.watch({"aten::erfinv", "aten::erf", "not an operator"}) is True
        assert watch.watch({"aten::erf"}) is False
        assert watch.overridden(known=True) == ["aten::erfinv"]
    finally:
        lib._destroy()
    assert watch.overridden() == []  # a registration taken back leaves the table as it was
    assert watch.reads == {"all": 2, "known": 2}


def test_kernels_for_keys_that_do_not_run_on_the_judges_tensors_are_not_overrides() -> None:
    watch = OperatorWatch(torch)
    lib = torch.library.Library("aten", "IMPL")
    try:
        lib.impl("erfinv", lambda t: t, "Meta")  # what torch's own modules add as they are first imported
        assert watch.overridden() == []
    finally:
        lib._destroy()
