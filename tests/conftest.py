"""Shared fixtures: paths to the data beside the project, GPU detection, a per-session cache."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
EXAMPLES = ROOT / "cuda_agent" / "tasks" / "examples"


def has_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return out.returncode == 0 and "GPU" in out.stdout


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip("../shared/ is not beside the project")
    return SHARED


@pytest.fixture(scope="session", autouse=True)
def _build_cache() -> None:
    # Builds and baselines are cached by content across test runs, so the suite stays fast.
    os.environ.setdefault("CUDA_AGENT_CACHE", str(Path.home() / ".cache" / "cuda-agent-tests"))
