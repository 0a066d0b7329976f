"""Facts about this machine that every layer asks for: which GPUs there are, their names, capability and
driver, the torch and compilers installed, where caches live.

One place, at the bottom of the layers, so the judge, the sandbox, the workspace, evaluation and the CLI
agree (they once detected devices in two modules each, and asked nvidia-smi in three). Everything is asked
of `nvidia-smi` or read from files, never of torch, so a caller that only needs a fact holds no CUDA
context and pays no torch import (seconds).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

CACHE_ENV = "CUDA_AGENT_CACHE"


def cache_root() -> Path:
    """Where builds, baselines, verdicts and GPU turns are cached: $CUDA_AGENT_CACHE or ~/.cache/cuda-agent."""
    return Path(os.environ.get(CACHE_ENV, Path.home() / ".cache" / "cuda-agent"))


def _nvidia_smi(*args: str) -> str | None:
    """nvidia-smi's output, or None where there is none or it fails (no driver, no GPU)."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


GPU_FIELDS = ("index", "name", "uuid", "driver_version", "compute_cap")
"""What `_gpu_table` asks nvidia-smi of each GPU, in one call."""


def _table_file() -> Path | None:
    """Where this boot's GPU table is kept: named for the boot and for the nvidia-smi that answered (a driver
    upgraded in place brings a new one); None where either cannot be told."""
    found = shutil.which("nvidia-smi")
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        stat = Path(found).resolve().stat() if found else None
    except OSError:
        return None
    if stat is None:
        return None
    facts = f"{boot}|{Path(found).resolve()}|{stat.st_size}|{stat.st_mtime_ns}"  # type: ignore[arg-type]
    return cache_root() / "machine" / f"gpus-{hashlib.sha256(facts.encode()).hexdigest()[:16]}.json"


@functools.cache
def _gpu_table() -> tuple[dict[str, str], ...]:
    """One row per GPU (GPU_FIELDS), in nvidia-smi's order; empty where it cannot say.

    Asked of nvidia-smi once per boot of the machine and kept in the cache: every judgement asks in two or three
    fresh processes (the sandbox's runners, the CLI), and nvidia-smi takes a while in a VM without the driver's
    persistence daemon. An answer of no GPUs is kept in this process only, never in the file (a driver still
    loading would stay unseen all boot), as every fact here was kept per process before.
    """
    kept = _table_file()
    if kept is not None:
        try:
            rows = json.loads(kept.read_text())
            if isinstance(rows, list) and rows and all(set(r) == set(GPU_FIELDS) for r in rows):
                return tuple(rows)
        except (OSError, ValueError, TypeError):
            pass  # not there yet, or torn: ask again
    out = _nvidia_smi(f"--query-gpu={','.join(GPU_FIELDS)}", "--format=csv,noheader") or ""
    rows = []
    for line in out.strip().splitlines():
        values = [v.strip() for v in line.split(",")]
        if len(values) == len(GPU_FIELDS):
            rows.append(dict(zip(GPU_FIELDS, values, strict=True)))
    if rows and kept is not None:
        with contextlib.suppress(OSError):  # a read-only cache: ask each time
            kept.parent.mkdir(parents=True, exist_ok=True)
            partial = kept.with_name(f"{kept.name}.{os.getpid()}")
            partial.write_text(json.dumps(rows))
            partial.replace(kept)
    return tuple(rows)


def detect_gpus() -> list[int]:
    """Indices of the visible GPUs, numbered as nvidia-smi numbers them."""
    return list(range(len(_gpu_table())))


@functools.cache
def detect_device(requested: str) -> str:
    """'auto' -> 'cuda' if a GPU is visible, else 'cpu'; 'cuda' and 'cpu' stand as given."""
    if requested != "auto":
        return requested
    return "cuda" if detect_gpus() else "cpu"


def gpu_name() -> str:
    """The first GPU's name as nvidia-smi gives it ('NVIDIA H200'), or 'cuda' where it cannot say."""
    table = _gpu_table()
    return table[0]["name"] if table else "cuda"


def gpu_uuids() -> tuple[str, ...]:
    """The GPUs' UUIDs ('GPU-...'), in nvidia-smi's order; empty where it cannot say."""
    return tuple(row["uuid"] for row in _gpu_table() if row["uuid"].startswith("GPU-"))


def driver_version() -> str | None:
    """The NVIDIA driver's version ('580.95.05'), or None without one."""
    table = _gpu_table()
    return table[0]["driver_version"] if table else None


def cuda_arch_list() -> str:
    """TORCH_CUDA_ARCH_LIST for builds on this machine: the variable's own value, else the first GPU's
    capability ('9.0'), else Hopper's where nvidia-smi cannot say."""
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return os.environ["TORCH_CUDA_ARCH_LIST"]
    return _gpu_capability() or "9.0"


def _gpu_capability() -> str | None:
    table = _gpu_table()
    return table[0]["compute_cap"] if table and re.fullmatch(r"\d+\.\d+", table[0]["compute_cap"]) else None


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
