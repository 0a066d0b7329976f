"""`cuda-agent synth` as a user types it: asking for a GPU this machine lacks is bad usage, answered at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.machine import detect_device
from tests.user import cli


@pytest.mark.parametrize("command", [["synth", "--n", "1"], ["synth", "audit", "ops6k.parquet"]])
def test_device_cuda_without_a_gpu_is_bad_usage_not_ours(tmp_path: Path, command: list[str]) -> None:
    if detect_device("auto") == "cuda":
        pytest.skip("this machine has a GPU")
    done = cli(*command, "--device", "cuda", "--out", str(tmp_path / "out"), timeout_s=60)
    assert (done.returncode, done.stderr) == (
        2,
        "error: --device cuda: no GPU is visible on this machine; use --device cpu or auto\n",
    )
    assert list(tmp_path.iterdir()) == []  # nothing was started
