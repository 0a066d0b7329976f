"""The judge's one door for other packages (cuda_agent/judge/__init__.py)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

import cuda_agent.judge as judge_package
from tests.judge.helpers import ROOT


@pytest.mark.parametrize("name", judge_package.__all__)
def test_every_exported_name_is_its_modules_own(name: str) -> None:
    home = importlib.import_module(f"cuda_agent.judge.{judge_package._HOMES[name]}")
    assert getattr(judge_package, name) is getattr(home, name)


def test_a_name_imports_only_the_module_that_defines_it() -> None:
    # synth's filter workers and the judge's children take a few names; the grader's modules (and their
    # imports) would cost each of them time for nothing
    code = (
        "import json, sys; from cuda_agent.judge import Clock, apply_precision_flags\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('cuda_agent.judge.'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert json.loads(done.stdout) == [
        "cuda_agent.judge.child",
        "cuda_agent.judge.child.timing",
        "cuda_agent.judge.env",
    ]


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'pipeline_internals'"):
        judge_package.pipeline_internals  # noqa: B018
