"""Facts about this machine that every layer asks for: which GPUs there are, the GPU's name, where caches live.

One place, at the bottom of the layers, so the judge, the sandbox, evaluation and the CLI agree (they once
detected devices in two modules each). Everything is asked of `nvidia-smi`, never of torch, so a caller that
only needs a fact holds no CUDA context and pays no torch import.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path


def cache_root() -> Path:
    """Where builds, baselines, verdicts and GPU turns are cached: $CUDA_AGENT_CACHE or ~/.cache/cuda-agent."""
    return Path(os.environ.get("CUDA_AGENT_CACHE", Path.home() / ".cache" / "cuda-agent"))


def _nvidia_smi(*args: str) -> str | None:
    """nvidia-smi's output, or None where there is none or it fails (no driver, no GPU)."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def detect_gpus() -> list[int]:
    """Indices of the visible GPUs, numbered as nvidia-smi numbers them."""
    listing = _nvidia_smi("-L") or ""
    return list(range(sum(1 for line in listing.splitlines() if line.startswith("GPU "))))


@functools.cache
def detect_device(requested: str) -> str:
    """'auto' -> 'cuda' if a GPU is visible, else 'cpu'; 'cuda' and 'cpu' stand as given."""
    if requested != "auto":
        return requested
    return "cuda" if detect_gpus() else "cpu"


@functools.cache
def gpu_name() -> str:
    """The first GPU's name as nvidia-smi gives it ('NVIDIA H200'), or 'cuda' where it cannot say."""
    names = (_nvidia_smi("--query-gpu=name", "--format=csv,noheader") or "").strip().splitlines()
    return names[0] if names else "cuda"
