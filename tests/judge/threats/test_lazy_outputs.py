"""Threat 7: outputs that compute lazily (tensor subclasses, torch function modes, hooks, finalizers).

The static policy's cases come first, then the runtime defences with the judge end to end.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.judge.threats._hacks import checks_of, judge_hack, model_new
from tests.judge.threats._static import checks, expect, solution


def test_template_is_legit() -> None:
    assert checks(solution()) == set()


def test_rejects_tensor_subclass_with_torch_function() -> None:
    prelude = (
        "\nclass Lazy(torch.Tensor):\n    @classmethod\n"
        "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n        return func(*args)\n"
    )
    assert checks(solution(prelude=prelude)) == expect({"lazy_output_hooks"})


def test_rejects_make_subclass() -> None:
    forward = "return torch.Tensor._make_subclass(torch.Tensor, ext.relu_forward(x))"
    # A private name of torch's, reached through a chain, is dynamic_code too (red team, 2026-12-05).
    assert checks(solution(forward=forward)) == expect(
        {"lazy_output_hooks", "torch_compute_in_forward", "dynamic_code"},
        kernelbench={"lazy_output_hooks", "dynamic_code"},
    )


def test_rejects_forward_hooks() -> None:
    init = "def __init__(self):\n    super().__init__()\n    self.register_forward_hook(lambda m, i, o: o)\n"
    assert checks(solution(init=init)) == expect({"lazy_output_hooks"})


def test_rejects_finalizers() -> None:
    assert checks(solution(init="def __del__(self):\n    pass\n")) == expect(
        {"lazy_output_hooks", "forbidden_override"}
    )


def test_rejects_dispatch_modes() -> None:
    prelude = (
        "from torch.utils._python_dispatch import TorchDispatchMode\n\n\nclass Mode(TorchDispatchMode):\n    pass\n"
    )
    source = solution(prelude=prelude)
    assert checks(source) == expect({"forbidden_import", "lazy_output_hooks"}, kernelbench={"lazy_output_hooks"})


# Runtime: the judge end to end on the CPU, sharing one build of the hack extension (see _hacks.py).


SUBCLASS_OUTPUT = """
class ModelNew(nn.Module):
    class Lazy(torch.Tensor):
        pass

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu(x.contiguous()).as_subclass(ModelNew.Lazy)
"""


def test_runtime_rejects_tensor_subclass_output(tmp_path: Path) -> None:
    verdict = judge_hack(tmp_path, "examples/relu", SUBCLASS_OUTPUT, static_policy=False)
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", {"non_tensor_output"}), verdict.message


# A container of the solution's own: its code would run when the judge reads the outputs (red team round 9: a list
# subclass whose __iter__ ran the kernel on the judge's first read after the clock stopped, reward 3).


@pytest.mark.parametrize(
    "prelude",
    [
        "class Box(list):\n    pass",
        "class Box(tuple):\n    pass",
        "import collections\nclass Box(collections.UserList):\n    pass",
        "class Box:\n    def __iter__(self):\n        return iter([])",
        "class Box:\n    def __getitem__(self, i):\n        return i",
        "class Box:\n    def __len__(self):\n        return 1",
    ],
    ids=["list", "tuple", "user_list", "iter", "getitem", "len"],
)
def test_rejects_containers_of_the_solutions_own(prelude: str) -> None:
    found = checks(solution(prelude=prelude))
    assert "lazy_output_hooks" in found, found


LIST_BOX = """
class Box(list):
    def __init__(self, x):
        super().__init__()
        self.x = x

    def __iter__(self):
        return iter([ext.relu(self.x)])

    def __len__(self):
        return 1


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return Box(x.contiguous())
"""


@pytest.mark.slow
def test_runtime_reads_a_list_subclass_through_the_builtin_alone(tmp_path: Path) -> None:
    # What the box really holds is nothing: the judge never runs its __iter__, so the kernel never runs at all
    # (before, the judge's first read ran it: a pass, and reward 3 where the read came after the clock).
    verdict = judge_hack(tmp_path, "examples/relu", LIST_BOX, static_policy=False, time=True)
    assert (verdict.verdict, verdict.reward) == ("incorrect", -1), verdict.message
    assert len(verdict.checks) == 1 and not verdict.checks[0]["ok"]  # the first trial: an empty list of outputs


@pytest.mark.parametrize(
    "returned", ["(ext.relu(x.contiguous()),)", "[ext.relu(x.contiguous())]"], ids=["tuple", "list"]
)
@pytest.mark.slow
def test_runtime_accepts_plain_lists_and_tuples_of_outputs(tmp_path: Path, returned: str) -> None:
    source = model_new(f"return {returned}")
    verdict = judge_hack(tmp_path, "examples/relu", source, time=True)
    assert (verdict.verdict, verdict.correct) == ("pass", True), verdict.message


def test_plain_outputs_reads_through_the_builtins_alone() -> None:
    import torch

    from cuda_agent.judge.child.trial import plain_outputs

    x = torch.randn(3, 4)

    class Box(list):
        def __iter__(self):
            raise AssertionError("the judge ran the box's own __iter__")

    result = torch.max(x, 1)
    assert type(result) is not tuple and plain_outputs(torch, result) == [result.values, result.indices]
    assert [t is x for t in plain_outputs(torch, Box([x, (x,)]))] == [True, True]  # its real contents, nested
    assert plain_outputs(torch, [x, 3]) is None
    assert plain_outputs(torch, x.as_subclass(type("Lazy", (torch.Tensor,), {}))) is None
