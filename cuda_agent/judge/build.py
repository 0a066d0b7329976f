"""Build stage: compile a solution's extension in a child process, cached by content.

The child (`python -m cuda_agent.judge.build SOLUTION EXT_DIR`) imports the solution file with
`TORCH_EXTENSIONS_DIR` pointing at a folder keyed by the solution's bytes, the target
architecture and the torch version; its `load_inline` calls compile there. The candidate process
later imports the same file with the same folder and finds the build done. A marker file written
after a successful build makes a repeat judgement skip the child entirely, in any process.
The child may be started ahead (`--standby`, judge/standby.py: a long-lived pool's prepare stage keeps one,
sandbox/spare.py): it imports torch before its request, which then brings the build's own variables, folder and
confinement; the rest is as a child started for the build (~5 s of a cold build's 24 s on the H100).

Fast builds: the child compiles the same program faster, through the environment only, so
torch's build files (and so ninja's record of the commands) are the ones the candidate's process
writes again when it loads the build, and ninja there finds nothing to do:
- a CUDA unit gets a stand-in for torch's headers by an `-I` folder put first through
  `NVCC_PREPEND_FLAGS`, where its guard lets it through (judge/header_guard.py: guards made from the
  preprocessed headers once per torch, naming what a stand-in leaves out that could change a unit that
  still compiles): first the lean header (ATen's tensor and dispatch headers and the operators the unit
  names, in place of `<torch/types.h>` and `<torch/extension.h>`; made in the build's own folder, which
  keeps it for the candidate's load), else the light one (`<torch/extension.h>` as `<torch/types.h>`:
  nvcc's two front ends and the host compiler then skip pybind11, Python and torch's C++ frontend). A
  unit that does not compile so is built again with more of torch's headers, and last with its own;
- `main.cpp` (which load_inline starts with `#include <torch/extension.h>`) finds a precompiled
  header for its exact flags in a `CPATH` folder; gcc checks that it fits and otherwise reads the
  header itself. The header and the guards are made once per machine, torch and flag set, by a
  trusted process beside the first build that needs them (`python -m cuda_agent.judge.fast_build
  --prepare`), never by the candidate's. It makes the guards first; a CUDA build that started it waits
  for them (seconds, where torch's own headers cost a minute), not for the precompiled header (it helps
  later builds); the judgement waits for all of it, before CPU timing and before it returns
  (`BuildResult.preparing`).
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cuda_agent.judge.confine import confined_env, keep_build, private_copy
from cuda_agent.judge.fast_build import (
    FAST_BUILD,
    LIGHT_FAILED,
    Preparing,
    fast_load_inline,
    start_prepare,
    wait_for_guards,
)
from cuda_agent.judge.solution import SolutionSource
from cuda_agent.judge.standby import Standby, StandbySpec, serve_once
from cuda_agent.machine import CACHE_ENV, cuda_arch_list, toolchain, torch_versions
from cuda_agent.subproc import ChildResult, Confinement, child_env, ninja_dry_run, run_module
from cuda_agent.workspace.build import BUILD_DIR

_ERROR_LINE = re.compile(r"(error:|error\b.*:|: fatal error|undefined symbol|error [A-Z]\d+)", re.IGNORECASE)
_NOISE = re.compile(r"^\[\d+/\d+\]|^ninja: |^FAILED: |^c\+\+ |^/usr/.*nvcc |^Traceback|^  File |^subprocess")
OK_MARKER = ".cuda_agent_build_ok"
LOADING_LOCK = ".cuda_agent_loading"
COMPILE_FAILED = 3
"""The build child's exit code when the compiler failed (a compile_error)."""
IMPORT_FAILED = 4
"""The build child's exit code when the solution's top-level Python failed: no verdict here, the run stage
meets the same failure and reports it."""
FAST_DIR_ENV = "CUDA_AGENT_FAST_BUILD"
"""Tells the build child where the prepared precompiled headers and light header are (unset: plain builds)."""


@dataclass(frozen=True)
class BuildResult:
    """Outcome of the build stage."""

    ok: bool
    ext_dir: Path
    log: str
    wall_s: float
    cached: bool = False
    timed_out: bool = False
    stale: str = ""
    """Why a build found in the cache was not trusted and was built again (a part of it is missing or out of
    date), else empty."""
    unfinished: str = ""
    """How the importing child ended where it finished no build (the solution's top level failed, or the process
    was killed or exited on its own), else empty: the run stage then meets the same, or compiles what is missing."""
    header_retries: str = ""
    """Where the CUDA unit failed with a stand-in for torch's headers and was built again with more (the fast build's
    retries, which a compile_error's log and a verdict's env name), else empty."""
    preparing: Preparing | None = None
    """A `prepare` started beside this build and maybe still running: it helps later builds only, so the build
    does not wait for it; the caller does (`finish_prepare`) before it times on cores the prepare shares, and
    before its process ends (a pool's job is killed with its cgroup, and the prepare with it)."""


def target_arch(device: str) -> str:
    """TORCH_CUDA_ARCH_LIST for a build for `device` ('cpu' for the CPU: no CUDA code is built)."""
    return cuda_arch_list() if device == "cuda" else "cpu"


def ext_dir_for(build_hash: str, device: str, cache_dir: Path) -> Path:
    """Build folder of one solution on one architecture, torch, Python, compiler and build method."""
    arch = target_arch(device)
    torch_version = torch_versions()["torch"]
    facts = f"{build_hash}|{arch}|{torch_version}|{sys.version_info[:2]}|{FAST_BUILD}|{toolchain()}"
    key = hashlib.sha256(facts.encode()).hexdigest()
    return cache_dir / "builds" / key[:24]


@contextmanager
def loading_extensions(ext_dir: Path) -> Iterator[None]:
    """Hold the build folder while torch's extension loader may take its own lock there.

    torch's loader marks a build in progress with a plain `lock` file (its FileBaton) and waits with
    no limit for the file to go. A process killed while it holds one (a cancelled job, a time limit)
    leaves the file, and every later load of that build would wait until the judge's run limit.
    Every process of ours that loads extensions from `ext_dir` holds this flock meanwhile; the
    kernel drops a flock with its process, so whoever holds it knows that any torch lock file in the
    folder is stale, and removes it. Where the flock file cannot be opened (a read-only folder),
    this does nothing.
    """
    try:
        fd = os.open(ext_dir / LOADING_LOCK, os.O_RDONLY | os.O_CREAT, 0o666)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        for stale in ext_dir.glob("*/lock"):
            if stale.parent.name != "src":  # src/ is a workspace's copy: its files are the candidate's
                stale.unlink(missing_ok=True)
        yield
    finally:
        os.close(fd)  # closing drops the flock


def _child_env(ext_dir: Path, device: str, fast_dir: Path, python_path: list[str]) -> dict[str, str]:
    """The importing child's environment: the build folder, the architecture, the fast-build folder."""
    env = child_env({"TORCH_EXTENSIONS_DIR": str(ext_dir), "TORCH_CUDA_ARCH_LIST": target_arch(device)})
    env[FAST_DIR_ENV] = str(fast_dir)
    env["PYTHONPATH"] = os.pathsep.join([*python_path, env["PYTHONPATH"]])
    if device != "cuda":
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def build_solution(
    solution_file: Path,
    build_hash: str,
    device: str,
    cache_dir: Path,
    timeout_s: float,
    kernels: Callable[[Path], tuple[bool, str]] | None = None,
    import_needed: bool = True,
    python_path: list[str] | None = None,
    user: pwd.struct_passwd | None = None,
    standby: Standby | None = None,
) -> BuildResult:
    """Compile a solution's extension(s); reuse a finished build.

    Args:
        solution_file: the Python file defining ModelNew (its load_inline calls are a build).
        build_hash: hash of every source byte of the solution (keys the cache).
        device: 'cuda' or 'cpu' (sets the target architecture).
        cache_dir: root of the build cache.
        timeout_s: wall-clock limit; the compiler's process group is killed at the limit.
        kernels: a workspace's kernel build, called with the build folder first; returns (ok, log).
        import_needed: import the solution in a child to run its load_inline/load builds.
        python_path: folders the importing child needs on sys.path (a workspace's built module).
        user: run the importing child (the candidate's top-level code) as this user, on a private copy
            of the build folder (confine.py).
        standby: an importing child started ahead (`build_spec`; torch imported), used in place of a new one
            where it fits (closed after); the caller closes one that was not used (twice is safe).
    """
    ext_dir = ext_dir_for(build_hash, device, cache_dir)
    stale = ""
    if (ext_dir / OK_MARKER).exists():
        stale = cached_build_gap(ext_dir)
        if not stale:
            _discard(standby)
            return BuildResult(ok=True, ext_dir=ext_dir, log="", wall_s=0.0, cached=True)
        (ext_dir / OK_MARKER).unlink(missing_ok=True)  # no other judgement trusts it meanwhile
    ext_dir.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    if kernels is not None:
        ok, log = kernels(ext_dir)
        if not ok:
            timed_out = log.startswith("build exceeded")
            log = log if timed_out else trim_compile_log(log)
            wall_s = time.monotonic() - start
            return BuildResult(ok=False, ext_dir=ext_dir, log=log, wall_s=wall_s, timed_out=timed_out, stale=stale)
    if not import_needed:
        _write_marker(ext_dir, time.monotonic() - start)
        return BuildResult(ok=True, ext_dir=ext_dir, log="", wall_s=time.monotonic() - start, stale=stale)
    solution_file, fast_dir = _build_copy(solution_file), cache_dir / "fast"  # ModelNew left out: _build_copy
    preparing = start_prepare(solution_file, device, fast_dir)
    wait_for_guards(preparing, device, fast_dir)  # a first CUDA build on this machine: seconds, against a minute
    env = _child_env(ext_dir, device, fast_dir, python_path or [])
    if python_path:  # a standby's sys.path, set at its start, lacks a workspace's module folder
        _discard(standby)
        standby = None
    if user is None:
        args = [str(solution_file), str(ext_dir)]
        child = _import_child(args, env, timeout_s, solution_file.parent, None, standby, device, cache_dir)
    else:
        with tempfile.TemporaryDirectory(prefix="cuda-agent-confined-build-") as scratch:
            own_file = Path(shutil.copy2(solution_file, Path(scratch) / solution_file.name))
            confinement = private_copy(ext_dir, Path(scratch), user, cache_dir)
            env = confined_env(env, scratch)
            args = [str(own_file), str(ext_dir)]
            child = _import_child(args, env, timeout_s, Path(scratch), confinement, standby, device, cache_dir)
            keep_build(confinement, ext_dir)
    wall_s = time.monotonic() - start
    retries = header_retries(child.stdout)
    result = BuildResult(
        ok=True, ext_dir=ext_dir, log="", wall_s=wall_s, preparing=preparing, stale=stale, header_retries=retries
    )
    if child.timed_out:
        return dataclasses.replace(result, ok=False, log=f"build exceeded {timeout_s:.0f} s", timed_out=True)
    if child.returncode == COMPILE_FAILED:
        log = trim_compile_log(child.stdout + "\n" + child.stderr)
        log = f"({retries}; this is the error with torch's own headers)\n{log}" if retries else log
        return dataclasses.replace(result, ok=False, log=log)
    if child.returncode == 0:
        _write_marker(ext_dir, wall_s)
    return dataclasses.replace(result, unfinished=_how_it_ended(child)) if child.returncode else result


def _build_copy(solution_file: Path) -> Path:
    """The solution as the build stage imports it, beside it: ModelNew replaced by an empty class. The build runs
    only what its key covers (SolutionSource.build_python); ModelNew runs in the candidate's own process."""
    copy = solution_file.with_name(f"build-{solution_file.name}")
    copy.write_text(SolutionSource(python=solution_file.read_text()).build_python)
    return copy


def header_retries(stdout: str) -> str:
    """What the build child's fast build said of its retries (fast_build.LIGHT_FAILED lines), in one line."""
    headers = [line.split(LIGHT_FAILED, 1)[1].strip(" ()") for line in stdout.splitlines() if LIGHT_FAILED in line]
    if not headers:
        return ""
    return f"the CUDA unit failed with fewer of torch's headers ({', '.join(headers)}) and was built again with more"


def _how_it_ended(child: ChildResult) -> str:
    """How an importing child that finished no build ended: Python at the solution's top level failed
    (IMPORT_FAILED), or the process was killed or exited on its own. Not the compiler's doing: the run stage meets
    the same and reports it."""
    said = " ".join(child.stderr.strip().splitlines()[-2:])[-300:]
    return f"exit {child.returncode}" + (f": {said}" if said else "")


STANDBY_READY_S = 120.0
"""Longest a build waits for its standby's start (importing torch) before it starts a child of its own."""


def build_spec(device: str, namespace: bool, cache_dir: Path) -> StandbySpec:
    """How an importing child is started ahead (`--standby`): our environment with the judgement's cache (which a
    confined one must reach, standby.py), no GPU for a CPU build, in a mount namespace of its own where the build
    will be confined. The build's own variables (TORCH_EXTENSIONS_DIR, the architecture, the fast-build folder,
    HOME and TMPDIR) come with its request."""
    env = child_env({CACHE_ENV: str(cache_dir)})
    if device != "cuda":
        env["CUDA_VISIBLE_DEVICES"] = ""
    return StandbySpec.of(__name__, env, namespace)


def _discard(standby: Standby | None) -> None:
    if standby is not None:
        standby.close()


def _import_child(
    args: list[str],
    env: dict[str, str],
    timeout_s: float,
    cwd: Path,
    confine: Confinement | None,
    standby: Standby | None,
    device: str,
    cache_dir: Path,
) -> ChildResult:
    """The importing child's run: in `standby` where it was started as this child would be (`build_spec`: the
    same environment but the build's own variables, which the request sets), else in a new process. The standby
    is closed after, used or not."""
    spec = build_spec(device, namespace=confine is not None, cache_dir=cache_dir)
    fits = standby is not None and standby.unfit_for(spec) is None
    if fits and standby.wait_ready(STANDBY_READY_S) is None:
        started_as = dict(standby.spec.env)
        # HOME and TMPDIR always: the standby runs in a folder of its own until then (a compiler cache finds its
        # folder from HOME)
        changed = {k: v for k, v in env.items() if started_as.get(k) != v or k in ("HOME", "TMPDIR")}
        try:
            standby.go(args, cwd, changed, confine)
            child, _ = standby.wait(timeout_s, timeout_s)  # no steps: the whole build is one
            return child
        finally:
            standby.close()
    _discard(standby)
    return run_module(__name__, args, timeout_s=timeout_s, env=env, cwd=cwd, confine=confine)


def _warm_up() -> None:
    """A standby's set-up: what every build imports (torch, its extension loader), nothing that compiles."""
    import torch.utils.cpp_extension  # noqa: F401


def _ninja_builds(ext_dir: Path) -> list[tuple[str, str]]:
    """(folder ninja runs in, its build file), relative to `ext_dir`, of each build in the folder: one per
    load_inline/load extension (torch's own build file in a folder named after it), and a workspace's kernels."""
    builds = [(p.parent.name, p.name) for p in sorted(ext_dir.glob("*/build.ninja")) if p.parent.name != "src"]
    if (ext_dir / "src" / BUILD_DIR / "build.ninja").is_file():
        builds.append(("src", f"{BUILD_DIR}/build.ninja"))
    return builds


def _write_marker(ext_dir: Path, wall_s: float) -> None:
    """Mark the build done, naming the builds it holds: a later judgement trusts it only if each is complete."""
    record = {"wall_s": round(wall_s, 1), "builds": _ninja_builds(ext_dir)}
    (ext_dir / OK_MARKER).write_text(json.dumps(record) + "\n")


def cached_build_gap(ext_dir: Path) -> str:
    """Why the marked build in `ext_dir` cannot be trusted as it is, else "".

    The marker promises that the candidate's load finds nothing to build: a folder missing an object or the
    module (an interrupted copy, a cleaner) would have the candidate's process compile it inside the run
    stage's time limit. ninja's dry run says whether each build is up to date, as the load's ninja will.
    """
    try:
        builds = json.loads((ext_dir / OK_MARKER).read_text())["builds"]
    except (ValueError, KeyError, TypeError):  # a marker of the judge before this check: the builds it holds now
        builds = _ninja_builds(ext_dir)
    except OSError as exc:
        return f"its marker cannot be read: {exc}"
    # The ninja that torch's load runs (`ninja` on PATH, as ninja_dry_run asks): another version (a venv's beside
    # its interpreter, with the venv not on PATH) reads the log of this one as having no command for any object.
    for folder, build_file in builds:
        if not (ext_dir / folder / build_file).is_file():
            return f"{folder}/{build_file} is missing"
        try:
            up_to_date, why = ninja_dry_run(ext_dir / folder, build_file)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"ninja could not check {folder}: {exc}"
        if not up_to_date:
            return f"{folder}: {(why or ['ninja would rebuild it'])[0]}"
    return ""


def trim_compile_log(log: str, context: int = 4, max_chars: int = 2500) -> str:
    """The first compiler error with file:line and a few lines after it; else the log's tail.

    Example:
        >>> trim_compile_log("[1/2] c++ ...\\nk.cpp:3:5: error: 'y' was not declared\\n  3 | y;\\n")
        "k.cpp:3:5: error: 'y' was not declared\\n  3 | y;"
    """
    if LIGHT_FAILED in log:  # a fast build's first try, with the light header, printed its own errors
        log = log.rsplit(LIGHT_FAILED, 1)[1]
    lines = [line.rstrip() for line in log.splitlines()]
    for i, line in enumerate(lines):
        if _ERROR_LINE.search(line) and not _NOISE.search(line):
            block = [line] + [ln for ln in lines[i + 1 : i + 1 + context] if ln and not _NOISE.search(ln)]
            more = sum(1 for ln in lines[i + 1 :] if _ERROR_LINE.search(ln) and not _NOISE.search(ln))
            text = "\n".join(block)
            if more:
                text += f"\n({more} more error lines)"
            return text[:max_chars]
    tail = [ln for ln in lines if ln.strip()][-15:]
    return "\n".join(tail)[-max_chars:]


def main(argv: list[str]) -> int:
    import importlib.util

    if argv[:1] == ["--standby"]:  # started ahead (build_spec): the request comes on stdin
        argv = serve_once(_warm_up)
    solution_file = Path(argv[0])
    spec = importlib.util.spec_from_file_location("cuda_agent_candidate_build", solution_file)
    module = importlib.util.module_from_spec(spec)
    fast_dir = os.environ.get(FAST_DIR_ENV)
    try:
        with loading_extensions(Path(argv[1])), fast_load_inline(Path(fast_dir) if fast_dir else None):
            spec.loader.exec_module(module)
    except Exception as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        building = "Error building extension" in str(exc) or "ninja" in str(exc).lower()
        return COMPILE_FAILED if building else IMPORT_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
