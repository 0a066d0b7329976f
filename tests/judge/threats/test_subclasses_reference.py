"""Threat 3: ModelNew inherits (or is) the reference, or overrides nn.Module's machinery (static policy)."""

from __future__ import annotations

from tests.judge.threats._static import checks, expect, solution


def test_template_is_legit() -> None:
    assert checks(solution()) == set()


def test_rejects_subclassing_the_reference() -> None:
    source = solution(prelude="from model import Model").replace("class ModelNew(nn.Module):", "class ModelNew(Model):")
    assert checks(source) == expect({"forbidden_import", "subclasses_reference"})


def test_rejects_subclassing_through_an_intermediate_class() -> None:
    source = solution(prelude="\nclass Base(nn.Module):\n    pass\n")
    assert checks(source.replace("class ModelNew(nn.Module):", "class ModelNew(Base):")) == expect(
        {"subclasses_reference"}
    )


def test_rejects_missing_model_new() -> None:
    assert checks(solution().replace("class ModelNew(", "class Model2(")) == expect({"missing_model_new"})


def test_rejects_rebinding_model_new() -> None:
    assert checks(solution() + "\nModelNew = nn.Identity\n") == expect({"missing_model_new"})


def test_rejects_overriding_call() -> None:
    assert checks(solution(init="def __call__(self, x):\n    return torch.relu(x)\n")) == expect({"forbidden_override"})


def test_rejects_overriding_module_methods() -> None:
    assert checks(solution(init="def to(self, *args, **kwargs):\n    return self\n")) == expect({"forbidden_override"})


def test_rejects_patching_the_class_from_outside() -> None:
    assert checks(solution() + "\nModelNew.forward = lambda self, x: x\n") == expect({"forbidden_override"})
