"""Facts about this machine that every layer asks for: which GPUs there are, their names, capability and
driver, the torch and compilers installed, where caches live.

One place, at the bottom of the layers, so the judge, the sandbox, the workspace, evaluation and the CLI
agree (they once detected devices in two modules each, and asked nvidia-smi in three). Everything is asked
of `nvidia-smi` or read from files, never of torch, so a caller that only needs a fact holds no CUDA
context and pays no torch import (seconds).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
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


@functools.cache
def gpu_uuids() -> tuple[str, ...]:
    """The GPUs' UUIDs ('GPU-...'), in nvidia-smi's order; empty where it cannot say."""
    return tuple(re.findall(r"\(UUID: (GPU-[0-9a-fA-F-]+)\)", _nvidia_smi("-L") or ""))


@functools.cache
def driver_version() -> str | None:
    """The NVIDIA driver's version ('580.95.05'), or None without one."""
    lines = (_nvidia_smi("--query-gpu=driver_version", "--format=csv,noheader") or "").strip().splitlines()
    return lines[0] if lines else None


def cuda_arch_list() -> str:
    """TORCH_CUDA_ARCH_LIST for builds on this machine: the variable's own value, else the first GPU's
    capability ('9.0'), else Hopper's where nvidia-smi cannot say."""
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return os.environ["TORCH_CUDA_ARCH_LIST"]
    return _gpu_capability() or "9.0"


@functools.cache
def _gpu_capability() -> str | None:
    lines = (_nvidia_smi("--query-gpu=compute_cap", "--format=csv,noheader") or "").strip().splitlines()
    return lines[0].strip() if lines and re.fullmatch(r"\d+\.\d+", lines[0].strip()) else None


@functools.cache
def torch_versions() -> dict[str, str | None]:
    """torch's version and the CUDA it was built for, read from torch/version.py without importing torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return {"torch": None, "cuda": None}
    found: dict[str, str | None] = {"__version__": None, "cuda": None}
    for line in (Path(spec.origin).parent / "version.py").read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and name.split(":")[0].strip() in found:
            text = value.strip().strip("'\"")
            found[name.split(":")[0].strip()] = None if text == "None" else text
    return {"torch": found["__version__"], "cuda": found["cuda"]}


@functools.cache
def toolchain() -> str:
    """Identity of the compilers a build runs (path, size, time of each), which its objects depend on."""
    facts = []
    for name in (os.environ.get("CXX", "c++"), "nvcc"):
        found = shutil.which(name)
        if found:
            real = Path(found).resolve()
            stat = real.stat()
            facts.append(f"{real}:{stat.st_size}:{stat.st_mtime_ns}")
    return ";".join(facts)
