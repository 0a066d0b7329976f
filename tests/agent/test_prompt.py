"""The episode's opening messages for each kernel language: the workspace's SKILL.md and the task, rendered."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.agent.prompt import opening_messages, task_prompt
from cuda_agent.tasks import Catalog
from cuda_agent.workspace import create_workspace, workspace_language

TOOLS = ["bash", "read", "write"]


@pytest.mark.parametrize("compact", [False, True])
def test_triton_prompt_renders_the_triton_workspace(tmp_path: Path, compact: bool) -> None:
    root = create_workspace(Catalog().resolve("examples/relu"), tmp_path / "ws", device="cpu", language="triton")
    system, task = opening_messages(root, TOOLS, "examples/relu", compact, workspace_language(root))
    assert "bash, read, write" in system["content"]
    if compact:
        assert "@triton.jit" in system["content"] and "kernels/<name>.cu" not in system["content"]
    else:
        assert system["content"].startswith("You are an expert Triton performance engineer")
        assert (root / "SKILL.md").read_text().strip() in system["content"]
        assert "`triton_kernel`" in system["content"] and "REGISTER_BINDING" not in system["content"]
    assert task == {"role": "user", "content": task_prompt("examples/relu", "triton")}
    assert "model_new.py with @triton.jit kernels" in task["content"] and "kernels/" not in task["content"]


def test_cuda_prompt_is_unchanged_by_the_language_setting(tmp_path: Path) -> None:
    root = create_workspace(Catalog().resolve("examples/relu"), tmp_path / "ws", device="cpu")
    system, task = opening_messages(root, TOOLS, "examples/relu")
    assert system["content"].startswith("You are an expert CUDA and C++ performance engineer")
    assert "Write model_new.py and kernels/ so that" in task["content"]
    compact = opening_messages(root, TOOLS, "examples/relu", compact=True)[0]["content"]
    assert "REGISTER_BINDING" in compact and "triton" not in compact
