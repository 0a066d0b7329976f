"""Fast single-file builds: lean or light stand-ins for torch's headers in the CUDA unit (their guards:
judge/header_guard.py) and a precompiled header for `main.cpp`, made once per machine, torch and flag set by a
trusted process (see `judge/build.py`'s docstring, which says how the build stage uses them and why the
candidate's own load then finds nothing to rebuild).
"""

from __future__ import annotations

import ast
import fcntl
import hashlib
import inspect
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent.judge.header_guard import guard_hits, lean_guard, lean_header, lean_plan, light_guard
from cuda_agent.judge.policy.build import LOAD_INLINE_PARAMS, bind_arguments
from cuda_agent.machine import toolchain, torch_versions
from cuda_agent.subproc import child_env, kill_group

FAST_BUILD = "lean-types-h+light-extension-h+pch/3"

LIGHT_HEADER = """\
// cuda-agent judge, fast build (cuda_agent/judge/build.py): stands in for <torch/extension.h> in a CUDA
// unit that names nothing declared by what <torch/extension.h> adds to <torch/types.h> (torch's C++
// frontend, pybind11, Python); the unit is built with the real header otherwise.
#pragma once
#include <torch/types.h>
"""
_PCH_SIBLING = """\
// cuda-agent judge, fast build: gcc reads torch/extension.h.gch beside this file for the unit's first
// #include <torch/extension.h>; any later one lands here and goes on to torch's own header.
#include_next <torch/extension.h>
"""
LIGHT_FAILED = "cuda-agent: the CUDA unit did not compile with fewer of torch's headers; building it with more"
LEAN_DIR = ".cuda_agent_lean"
"""In a build's TORCH_EXTENSIONS_DIR: its CUDA units' lean headers, one folder per operator set. They stay with
the build (ninja's record of the unit names them, and the candidate's load must find them unchanged), and a
candidate's build can write there only what concerns its own build."""


@dataclass(frozen=True)
class PchSpec:
    """How torch compiles `main.cpp` for one load_inline call (less the extension's name), and where its
    precompiled `<torch/extension.h>` lives."""

    compiler: str
    flags: tuple[str, ...]
    header: Path
    folder: Path

    @property
    def gch(self) -> Path:
        return self.folder / "torch" / "extension.h.gch"


def _main_flags(cpp_ext: Any, extra_cflags: list[str], include_paths: list[str], with_cuda: bool) -> PchSpec | None:
    """The compiler and flags torch's own build file gives `main.cpp` for these arguments, or None where
    they cannot be had (a CUDA build on a torch without CUDA, a torch whose private helper changed)."""
    helper = getattr(cpp_ext, "_write_ninja_file_to_build_library", None)
    if helper is None:
        return None
    wanted = {
        "name": "cuda_agent_pch",
        "sources": ["main.cpp"],
        "extra_cflags": list(extra_cflags),
        "extra_cuda_cflags": [],
        "extra_sycl_cflags": [],
        "extra_ldflags": [],
        "extra_include_paths": list(include_paths),
        "with_cuda": with_cuda,
        "with_sycl": False,
        "is_standalone": False,
    }
    with tempfile.TemporaryDirectory(prefix="cuda-agent-flags-") as scratch:
        path = Path(scratch) / "build.ninja"
        params = inspect.signature(helper).parameters
        try:
            helper(path=str(path), **{k: v for k, v in wanted.items() if k in params})
            lines = dict(line.split(" = ", 1) for line in path.read_text().splitlines() if " = " in line)
        except (OSError, RuntimeError, TypeError, ValueError):
            return None
    flags = [f for f in shlex.split(lines.get("cflags", "")) if not f.startswith("-DTORCH_EXTENSION_NAME=")]
    compiler = cpp_ext.get_cxx_compiler()
    header = Path(cpp_ext._TORCH_PATH) / "include" / "torch" / "extension.h"
    if not flags or not header.is_file():
        return None
    key = hashlib.sha256(json.dumps([compiler, flags, str(header), toolchain(), FAST_BUILD]).encode()).hexdigest()
    return PchSpec(compiler, tuple(flags), header, Path("pch-" + key[:24]))


@dataclass(frozen=True)
class LoadInlineCall:
    """What `prepare` needs of one load_inline call, read from the solution's source without running it."""

    extra_cflags: list[str]
    include_paths: list[str]
    with_cuda: bool


def load_inline_calls(source: str) -> list[LoadInlineCall]:
    """The load_inline calls of a solution whose flags are literal (others get no prepared header)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    calls = []
    for node in ast.walk(tree):
        func = getattr(node, "func", None)
        name = getattr(func, "attr", None) or getattr(func, "id", None)
        if not isinstance(node, ast.Call) or name != "load_inline":
            continue
        args, _refused = bind_arguments(node, LOAD_INLINE_PARAMS)  # the policy has judged how they are passed
        try:
            cflags = ast.literal_eval(args["extra_cflags"]) if "extra_cflags" in args else []
            includes = ast.literal_eval(args["extra_include_paths"]) if "extra_include_paths" in args else []
        except ValueError:
            continue
        cflags = [cflags] if isinstance(cflags, str) else list(cflags or [])
        includes = [includes] if isinstance(includes, str) else list(includes or [])
        cuda = args.get("cuda_sources")
        with_cuda = cuda is not None and not (isinstance(cuda, ast.Constant) and cuda.value is None)
        if all(isinstance(f, str) for f in cflags + includes):
            calls.append(LoadInlineCall(cflags, includes, with_cuda))
    return calls


def _light_dir(cpp_ext: Any, fast_dir: Path) -> tuple[Path, PchSpec] | None:
    """Where the light header and its guard are kept for this torch and compiler, and the flags to read
    torch's headers as a CUDA unit's host pass does; None without CUDA."""
    spec = _main_flags(cpp_ext, [], [], with_cuda=True)
    if spec is None:
        return None
    return fast_dir / ("light-" + spec.folder.name.removeprefix("pch-")), spec


def _publish(folder: Path, files: dict[str, bytes | Path]) -> None:
    """Make `folder` with these files (bytes, or a file to move in) all at once: other processes see the
    whole folder or none of it."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        for relative, content in files.items():
            target = partial / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, Path):
                os.replace(content, target)
            else:
                target.write_bytes(content)
        for path in [partial, *partial.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)  # a confined candidate reads them, never writes
        os.rename(partial, folder)
    except OSError:
        if not folder.exists():
            raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)  # left only when another process published first


def prepare(
    solution_file: Path, device: str, fast_dir: Path, timeout_s: float = 600.0, wait: bool = False
) -> list[str]:
    """Make what the fast build of this solution needs and lacks: a precompiled `<torch/extension.h>`
    per flag set of its load_inline calls, and (CUDA) the light header with its guard. Runs as us, never
    as the candidate, on flags that the policy has allowed. Returns what it made: nothing when another
    `prepare` is running, unless `wait`."""
    fast_dir.mkdir(parents=True, exist_ok=True)
    lock = os.open(fast_dir / ".prepare.lock", os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:  # another judgement is preparing: one set of compiles per machine at a time
        os.close(lock)
        return []
    try:
        return _prepare(solution_file, device, fast_dir, timeout_s)
    finally:
        os.close(lock)


def _prepare(solution_file: Path, device: str, fast_dir: Path, timeout_s: float) -> list[str]:
    import torch.utils.cpp_extension as cpp_ext

    made = []
    calls = load_inline_calls(solution_file.read_text(errors="replace"))
    # The guards first (seconds; a first build waits for them: `wait_for_guards`), then the precompiled headers.
    cuda_units = device == "cuda" and any(c.with_cuda for c in calls)
    light = _light_dir(cpp_ext, fast_dir) if cuda_units else None
    if light is not None and not light[0].exists():
        made += _make_guards(cpp_ext, *light, timeout_s)
    if cuda_units:  # settled: made, or why not (a torch without CUDA has none); a solution without CUDA says nothing
        guards_marker(fast_dir).parent.mkdir(parents=True, exist_ok=True)
        guards_marker(fast_dir).write_text(json.dumps(made))
    for call in calls:
        spec = _main_flags(cpp_ext, call.extra_cflags, call.include_paths, call.with_cuda)
        folder = fast_dir / spec.folder if spec else None
        if spec is None or folder.exists():
            continue
        if build_pch(spec, folder, timeout_s):
            made.append(folder.name)
    marker = _prepared_marker(solution_file, device, fast_dir)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(made))
    return made


def _make_guards(cpp_ext: Any, folder: Path, spec: PchSpec, timeout_s: float) -> list[str]:
    """The light header with its guard, and the lean guard, published in `folder`; what was made or why not."""
    made = []
    ops_dir = Path(cpp_ext._TORCH_PATH) / "include" / "ATen" / "ops"
    files: dict[str, bytes | Path] = {}
    try:
        files["lean.json"] = json.dumps(lean_guard(spec.compiler, list(spec.flags), ops_dir, timeout_s)).encode()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        made.append(f"no lean header: {exc}")  # the light one may still do
    try:
        files["guard.json"] = json.dumps(light_guard(spec.compiler, list(spec.flags), timeout_s)).encode()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        made.append(f"no light header: {exc}")  # builds stay plain; the marker keeps it from trying each time
    else:
        _publish(folder, {"torch/extension.h": LIGHT_HEADER.encode(), **files})
        made.append(folder.name)
    return made


def build_pch(spec: PchSpec, folder: Path, timeout_s: float = 600.0) -> bool:
    """Precompile `<torch/extension.h>` with `spec`'s flags into `folder` (for `CPATH`); whether it worked."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = folder.parent / f".{folder.name}.{os.getpid()}.gch"
    argv = [spec.compiler, *spec.flags, "-x", "c++-header", str(spec.header), "-o", str(partial)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
        if done.returncode == 0:
            _publish(folder, {"torch/extension.h.gch": partial, "torch/extension.h": _PCH_SIBLING.encode()})
        return done.returncode == 0 and pch_usable(spec, folder)
    finally:
        partial.unlink(missing_ok=True)


def pch_usable(spec: PchSpec, folder: Path) -> bool:
    """Whether gcc takes the precompiled header in `folder` for a `main.cpp` compiled with `spec`'s flags (and
    an extension name, which torch adds); gcc's `-H` marks a header it read precompiled with `!`."""
    argv = [
        spec.compiler,
        *spec.flags,
        "-DTORCH_EXTENSION_NAME=cuda_agent_probe",
        "-H",
        "-fsyntax-only",
        "-x",
        "c++",
        "-",
    ]
    env = dict(os.environ, CPATH=str(folder))
    done = subprocess.run(
        argv, input="#include <torch/extension.h>\n", capture_output=True, text=True, env=env, check=False
    )
    used = f"! {folder / 'torch' / 'extension.h.gch'}"
    return done.returncode == 0 and used in done.stderr.splitlines()


@dataclass
class Preparing:
    """A `prepare` running beside the build child."""

    process: subprocess.Popen[bytes]


def _prepared_marker(solution_file: Path, device: str, fast_dir: Path) -> Path:
    """A file that says `prepare` ran for load_inline calls like this solution's, on this torch and toolchain."""
    calls = load_inline_calls(solution_file.read_text(errors="replace"))
    facts = [[c.extra_cflags, c.include_paths, c.with_cuda] for c in calls]
    facts += [device, torch_versions(), toolchain(), FAST_BUILD, sys.executable]
    return fast_dir / "prepared" / hashlib.sha256(json.dumps(facts).encode()).hexdigest()[:24]


def guards_marker(fast_dir: Path) -> Path:
    """A file that says a `prepare` settled the CUDA units' guards on this torch and toolchain (made, or why not)."""
    facts = [torch_versions(), toolchain(), FAST_BUILD, sys.executable]
    return fast_dir / "prepared" / ("guards-" + hashlib.sha256(json.dumps(facts).encode()).hexdigest()[:24])


GUARD_WAIT_S = 60.0
"""How long a CUDA build on a machine not yet prepared waits for the guards. They take seconds (2-core CPU: ~25 s;
the precompiled header after them takes minutes), and without them the unit compiles with torch's own headers:
88 s CPU for L1/19's, against 19 s lean (bench/results/cpu-2026-12-05-lean/)."""


def _prepare_running(fast_dir: Path) -> bool:
    """Whether some `prepare` holds this machine's prepare lock now."""
    try:
        fd = os.open(fast_dir / ".prepare.lock", os.O_RDONLY)
    except OSError:
        return False
    try:  # a prepare starting in this instant finds the lock taken and skips; the next build starts it again
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases a lock taken here
    return False


def wait_for_guards(preparing: Preparing | None, device: str, fast_dir: Path, limit_s: float = GUARD_WAIT_S) -> float:
    """For a CUDA build that has just started this machine's `prepare`: wait until the guards are settled, the
    prepare (ours, or another that holds the lock) has ended, or `limit_s` has passed. Returns the seconds waited."""
    if preparing is None or device != "cuda":
        return 0.0
    start = time.monotonic()
    marker = guards_marker(fast_dir)
    while not marker.exists() and time.monotonic() - start < limit_s:
        if preparing.process.poll() is not None and not _prepare_running(fast_dir):
            break  # no prepare is making them (ours found another's lock and that one has ended, or it failed)
        time.sleep(0.2)
    return time.monotonic() - start


def start_prepare(solution_file: Path, device: str, fast_dir: Path) -> Preparing | None:
    """Start `prepare` for this solution in a process of its own (it imports torch; the judge need not),
    unless it ran before for calls like these."""
    if _prepared_marker(solution_file, device, fast_dir).exists():
        return None
    argv = [sys.executable, "-P", "-m", __name__, "--prepare", str(solution_file), device, str(fast_dir)]
    env = child_env()
    try:
        process = subprocess.Popen(
            argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
    except OSError:
        return None
    return Preparing(process)


def finish_prepare(preparing: Preparing | None, timeout_s: float) -> None:
    """Wait for a `prepare` to end (it helps the next build only), killing it past `timeout_s`."""
    if preparing is None:
        return
    try:
        preparing.process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(preparing.process.pid)
        preparing.process.wait()


@contextmanager
def _environ(changes: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _lean_folder(cuda_text: str, guard: dict[str, list] | None) -> Path | None:
    """The folder of this CUDA unit's lean header (made in the build's TORCH_EXTENSIONS_DIR, see LEAN_DIR), or
    None where its guard keeps the unit from a lean build."""
    ext_dir = os.environ.get("TORCH_EXTENSIONS_DIR")
    if guard is None or not cuda_text or not ext_dir:
        return None
    ops, refused = lean_plan(cuda_text, guard)
    if refused:
        return None
    text = lean_header(guard["base"], ops)
    folder = Path(ext_dir) / LEAN_DIR / hashlib.sha256(text.encode()).hexdigest()[:16]
    if not folder.is_dir():
        extension = "#pragma once\n#include <torch/types.h>  // the lean one beside this file\n"
        _publish(folder, {"torch/types.h": text.encode(), "torch/extension.h": extension.encode()})
    return folder


def stand_in_may_have_failed(error: str) -> bool:
    """Whether a build tried with a stand-in header may have failed for it, so torch's own headers must be tried.

    Only a failure that ninja's output pins on other objects alone (`main.o`: the stand-in is the CUDA unit's)
    is the build's own. Anything else is tried again: the CUDA object or the link failed (ninja >= 1.13 writes
    `FAILED: [code=1] cuda.cuda.o`, older ones `FAILED: cuda.cuda.o`), the output went to the console
    (`verbose=True` leaves only "Error building extension" here), or the built module failed to load. A unit that
    compiles with torch's own headers must never get compile_error from a stand-in.
    """
    failed = re.findall(r"\bFAILED: (?:\[code=\d+\] )?(\S+)", error)
    return not failed or any(not target.endswith(".o") or target.endswith(".cuda.o") for target in failed)


def _forget_cuda_objects(build_directory: str | None, name: str) -> None:
    """Remove a failed try's CUDA objects, so the next try compiles the unit again with its own headers (ninja
    would keep one that compiled, since the stand-in comes through the environment, not the build file)."""
    folder = Path(build_directory) if build_directory else Path(os.environ.get("TORCH_EXTENSIONS_DIR", "")) / name
    if build_directory or os.environ.get("TORCH_EXTENSIONS_DIR"):
        for path in folder.glob("*.cuda.o"):
            path.unlink(missing_ok=True)


@contextmanager
def fast_load_inline(fast_dir: Path | None) -> Iterator[None]:
    """In the build child: torch's load_inline, using what `prepare` made for each call.

    Per call: `CPATH` gets the precompiled header made for the call's `main.cpp` flags, when there is
    one. A CUDA unit is built with the first of these that its guard lets through and that compiles, first
    in nvcc's include path: the lean header (with the unit's operators), the light header (where the unit
    includes `<torch/extension.h>`), torch's own headers. A try that fails, unless ninja pins the failure on
    other objects alone (`stand_in_may_have_failed`), is followed by the next with torch's versioner as it was
    before the first try, so the module keeps its name; each such retry prints LIGHT_FAILED, naming the header,
    which the build stage reports (`BuildResult.header_retries`). The last try, with torch's own headers, is the
    one whose failure is the candidate's compile_error.
    """
    if fast_dir is None:
        yield
        return
    import torch.utils.cpp_extension as cpp_ext

    original = cpp_ext.load_inline
    signature = inspect.signature(original)
    light = _light_dir(cpp_ext, fast_dir)
    guards = {}
    for name in ("guard", "lean"):
        if light is not None and (light[0] / f"{name}.json").is_file():
            guards[name] = json.loads((light[0] / f"{name}.json").read_text())

    def load_inline(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        arguments = bound.arguments
        env: dict[str, str] = {}
        cuda = arguments.get("cuda_sources")
        cuda_text = "\n".join([cuda] if isinstance(cuda, str) else list(cuda or []))
        flags = arguments.get("extra_cflags") or []
        includes = arguments.get("extra_include_paths") or []
        spec = _main_flags(cpp_ext, list(flags), list(includes), bool(cuda_text))
        if spec is not None and (fast_dir / spec.folder / "torch" / "extension.h.gch").is_file():
            env["CPATH"] = os.pathsep.join(filter(None, [str(fast_dir / spec.folder), os.environ.get("CPATH")]))
        # <torch/extension.h>'s own additions are the light guard's, <torch/types.h>'s the lean guard's
        light_ok = "guard" in guards and not guard_hits(cuda_text, guards["guard"])
        extension = "torch/extension.h" in cuda_text
        tries = [_lean_folder(cuda_text, guards.get("lean")) if light_ok or not extension else None]
        if light_ok and extension:
            tries.append(light[0])
        versions = dict(cpp_ext.JIT_EXTENSION_VERSIONER.entries)
        for folder in filter(None, tries):
            nvcc_flags = " ".join(filter(None, [f"-I{folder}", os.environ.get("NVCC_PREPEND_FLAGS")]))
            try:
                with _environ(env | {"NVCC_PREPEND_FLAGS": nvcc_flags}):
                    return original(*args, **kwargs)
            except Exception as exc:
                if not stand_in_may_have_failed(str(exc)):
                    raise
                print(f"{LIGHT_FAILED} ({'lean' if LEAN_DIR in str(folder) else 'light'} header)", flush=True)
            _forget_cuda_objects(arguments.get("build_directory"), arguments["name"])
            cpp_ext.JIT_EXTENSION_VERSIONER.entries.clear()
            cpp_ext.JIT_EXTENSION_VERSIONER.entries.update(versions)
        with _environ(env):
            return original(*args, **kwargs)

    cpp_ext.load_inline = load_inline
    try:
        yield
    finally:
        cpp_ext.load_inline = original


if __name__ == "__main__":  # start_prepare's process: --prepare SOLUTION DEVICE FAST_DIR
    if sys.argv[1:2] != ["--prepare"] or len(sys.argv) != 5:
        sys.exit("usage: python -m cuda_agent.judge.fast_build --prepare SOLUTION DEVICE FAST_DIR")
    prepare(Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4]))
