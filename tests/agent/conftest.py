"""Fixtures for agent tests: a workspace folder with the real layout's editable rule, and a scripted server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_agent.workspace import is_editable
from tests.agent.fake_openai import FakeOpenAI

__all__ = ["is_editable"]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "kernels").mkdir(parents=True)
    (root / "utils").mkdir()
    (root / "model.py").write_text("import torch\n\nclass Model(torch.nn.Module):\n    pass\n")
    (root / "model_new.py").write_text("import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n")
    (root / "binding.cpp").write_text("// fixed glue\n")
    (root / "utils" / "verification.py").write_text("print('protected')\n")
    return root


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI().running() as server:
        yield server
