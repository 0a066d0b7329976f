"""Fast single-file builds: a light stand-in for `<torch/extension.h>` in the CUDA unit and a precompiled header
for `main.cpp`, made once per machine, torch and flag set by a trusted process (see `judge/build.py`'s docstring,
which says how the build stage uses them and why the candidate's own load then finds nothing to rebuild).
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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent.judge.policy.build import LOAD_INLINE_PARAMS, bind_arguments
from cuda_agent.judge.policy.cpp import blank_comments_and_literals
from cuda_agent.machine import toolchain, torch_versions
from cuda_agent.subproc import child_env, kill_group

FAST_BUILD = "light-extension-h+pch/2"

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
_IMPLICIT_SCOPES = frozenset({"", "at", "c10", "std"})
"""Scopes a unit reaches without naming them: the global one, and those of torch's and std's types (ADL)."""
LIGHT_FAILED = "cuda-agent: the CUDA unit did not compile with the light header; building it with <torch/extension.h>"


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


def unit_names(source: str) -> tuple[set[str], set[str]]:
    """Names a C++ unit can look up outside a class (every identifier not right after `.` or `->`), and
    the scopes it names (those before `::`, and those of its `using namespace`)."""
    code = blank_comments_and_literals(source)[1]  # words in comments and literals are not names
    names = {m.group(1) for m in re.finditer(r"(?<![\w.])(?<!->)\s*([A-Za-z_]\w*)", code)}
    scopes = set(re.findall(r"([A-Za-z_]\w*)\s*::", code))
    for used in re.findall(r"using\s+namespace\s+([\w:\s]+);", code):
        scopes.update(re.findall(r"\w+", used))
    return names, scopes


_SILENT_KINDS = frozenset({"func", "using", "usingns"})
"""Declarations that can change what a unit that compiles means (overloads, using-declarations and
-directives); a new type or variable of a name makes a unit that uses it fail to compile instead."""
_HIDING_SCOPES = frozenset({"", "torch", "at"})
"""Scopes with using-directives, where a new namespace hides what `S::name` found before (`torch::cuda`)."""


def guard_hits(source: str, guard: dict[str, list]) -> list[str]:
    """What in `source` the light header would leave out or could change: macros that the extra headers
    define, and functions, using-declarations or namespaces they declare in a scope the unit reaches (one
    it names before `::` or in `using namespace`, or an implicit one)."""
    names, scopes = unit_names(source)
    hits = [f"macro {m}" for m in guard["macros"] if m in names]
    for kind, scope, name in guard["decls"]:
        # Anything the unit names through an extra declaration (`py::x`, `pybind11::object`) would not
        # compile with the light header: no light try. Elsewhere only what can change a unit that compiles.
        explicit = scope == "" or all(part in scopes for part in scope.split("::"))
        named = explicit and (name in scopes or scope != "")
        if not named and kind not in _SILENT_KINDS and not (kind == "ns" and scope in _HIDING_SCOPES):
            continue
        if name in names and all(part in scopes or part in _IMPLICIT_SCOPES for part in scope.split("::")):
            hits.append(f"{kind} {scope}::{name}" if scope else f"{kind} ::{name}")
    return hits


_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|[A-Za-z_]\w*|::|\S')
_MARKER = re.compile(r'# (\d+) "([^"]*)"')
_CPP_KEYWORDS = frozenset(
    "alignas alignof asm auto bool break case catch char char8_t char16_t char32_t class concept const consteval "
    "constexpr constinit const_cast continue decltype default delete do double dynamic_cast else enum explicit "
    "export extern false float for friend goto if inline int long mutable namespace new noexcept nullptr operator "
    "private protected public register reinterpret_cast requires return short signed sizeof static static_assert "
    "static_cast struct switch template this thread_local throw true try typedef typeid typename union unsigned "
    "using virtual void volatile wchar_t while final override __attribute__ __extension__ __inline __restrict "
    "__asm__ __declspec".split()
)


def _is_name(token: str) -> bool:
    return bool(token) and (token[0].isalpha() or token[0] == "_") and token not in _CPP_KEYWORDS


def declarations(preprocessed: str) -> set[tuple[str, str, str, str]]:
    """(file, kind, scope, name) of each namespace-scope declaration in a preprocessed unit.

    kind: 'func' (a function or operator: a new overload counts even where the name exists), 'type',
    'var', 'ns', 'using' (a using-declaration; scope@target in the name), 'usingns'. It over-collects
    (a wrong guess only keeps a unit off the light header), and reads class and function bodies not at all.
    """
    tokens: list[str] = []
    files: list[str] = []
    current = ""
    for line in preprocessed.split("\n"):
        if line.startswith("#"):
            marker = _MARKER.match(line)
            current = marker.group(2) if marker else current
            continue
        for token in _TOKEN.findall(line):
            tokens.append(token)
            files.append(current)
    found: set[tuple[str, str, str, str]] = set()
    scopes: list[str] = []
    start, i, n = 0, 0, len(tokens)
    while i < n:
        token = tokens[i]
        if token not in ("{", "}", ";"):
            i += 1
            continue
        stmt = tokens[start:i]
        where = files[start] if start < i else files[i]
        scope = "::".join(s for s in scopes if s)
        if token == "}":
            if scopes:
                scopes.pop()
        elif token == "{" and "namespace" in stmt:
            k = stmt.index("namespace")
            parts = [t for t in stmt[k + 1 :] if _is_name(t)]
            found.update((where, "ns", scope, part) for part in parts)
            scopes.append("" if "inline" in stmt[:k] or not parts else "::".join(parts))
        elif token == "{" and stmt[:1] == ["extern"] and all(t == "extern" or t[0] == '"' for t in stmt):
            scopes.append("")  # extern "C" { ... }: the same scope
        else:
            found.update((where, kind, scope, name) for kind, name in _declared(stmt))
            if token == "{":  # a body: skip it, noting an unscoped enum's enumerators
                enum = "enum" in stmt and stmt[stmt.index("enum") + 1 : stmt.index("enum") + 2] not in (
                    ["class"],
                    ["struct"],
                )
                depth, prev, i = 1, "{", i + 1
                while i < n and depth:
                    t = tokens[i]
                    depth += {"{": 1, "}": -1}.get(t, 0)
                    if enum and depth == 1 and prev in ("{", ",") and _is_name(t):
                        found.add((files[i], "var", scope, t))
                    prev, i = t, i + 1
                if i < n and _is_name(tokens[i]) and not (stmt and stmt[-1] == ")"):
                    continue  # `struct S {...} s;`: the names after the body belong to this declaration
                start = i
                continue
        i += 1
        start = i
    return found


def _declared(stmt: list[str]) -> set[tuple[str, str]]:
    """(kind, name) declared by one namespace-scope statement (without its body)."""
    toks = _without_brackets(stmt)
    if not toks or toks[0] == "static_assert":
        return set()
    if toks[0] in ("using", "namespace"):
        return {_using(toks)}
    out: set[tuple[str, str]] = set()
    depth = angle = 0
    for k, t in enumerate(toks):
        before = toks[k - 1] if k else ""
        qualified = toks[k - 2 : k - 1] == ["::"]  # `C::f`: a member, or a name declared before
        if t in ("(", "["):
            if depth == 0 and t == "(" and _is_name(before) and not qualified:
                out.add(("func", before))
            depth += 1
        elif t in (")", "]"):
            depth -= 1
        elif depth == 0 and t == "<" and _is_name(before):
            angle += 1
        elif depth == 0 and t == ">" and angle:
            angle -= 1
        elif depth or angle:
            continue
        elif t == "operator" and k + 1 < len(toks):
            out.add(("func", "operator" + toks[k + 1]))
        elif t in ("class", "struct", "union", "enum", "typedef"):
            names = [x for x in toks[k + 1 :] if _is_name(x) and x not in ("class", "struct")]
            if names:
                out.add(("type", names[-1] if t == "typedef" else names[0]))
        elif t in ("=", ",", "{") and _is_name(before) and not qualified:
            out.add(("var", before))
    if depth == 0 and _is_name(toks[-1]) and not any(kind == "func" for kind, _ in out):
        out.add(("var", toks[-1]))
    return out


def _using(toks: list[str]) -> tuple[str, str]:
    """A using-declaration or -directive, an alias (`using T = ...`), or a namespace alias (`namespace py = pybind11`)."""
    if toks[0] == "namespace":
        return ("ns", toks[1] if len(toks) > 1 else "")
    if toks[1:2] == ["namespace"]:
        return ("usingns", "::".join(t for t in toks[2:] if _is_name(t)))
    if "=" in toks:
        return ("type", toks[toks.index("=") - 1])
    return ("using", "::".join(t for t in toks[1:] if _is_name(t) and t != "typename"))


def _without_brackets(stmt: list[str]) -> list[str]:
    """A statement without its template parameter lists and attribute-like parentheses."""
    toks: list[str] = []
    i = 0
    while i < len(stmt):
        attribute = stmt[i] in ("__attribute__", "__declspec", "alignas", "__asm__", "asm", "noexcept", "decltype")
        if stmt[i + 1 : i + 2] == ["<" if stmt[i] == "template" else "("] and (stmt[i] == "template" or attribute):
            opening, closing = ("<", ">") if stmt[i] == "template" else ("(", ")")
            depth, i = 0, i + 1
            while i < len(stmt):
                depth += (stmt[i] == opening) - (stmt[i] == closing)
                i += 1
                if depth <= 0:
                    break
            continue
        toks.append(stmt[i])
        i += 1
    return toks


def light_guard(compiler: str, flags: list[str], timeout_s: float = 600.0) -> dict[str, list]:
    """What `<torch/extension.h>` adds to `<torch/types.h>`: the macros it defines or changes, and the
    namespace-scope declarations of the headers that only it includes.

    Kept: every function (a new overload of a name the light header has too changes overload
    resolution), and any other name where the light header has nothing of that name in that scope;
    a using-declaration counts unless it names a type the light header declares there.
    """

    def preprocess(text: str, *extra: str) -> str:
        argv = [compiler, *flags, *extra, "-E", "-x", "c++", "-"]
        done = subprocess.run(argv, input=text, capture_output=True, text=True, timeout=timeout_s, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"preprocessing torch's headers failed: {done.stderr.strip()[-500:]}")
        return done.stdout

    light, full = "#include <torch/types.h>\n", "#include <torch/types.h>\n#include <torch/extension.h>\n"
    light_files = {m.group(2) for m in _MARKER.finditer(preprocess(light))}

    def macros(text: str) -> dict[str, str]:
        lines = [line.split(None, 2) for line in preprocess(text, "-dM").splitlines() if line.startswith("#define")]
        return {parts[1].split("(")[0]: " ".join(parts[1:]) for parts in lines if len(parts) > 1}

    light_macros, full_macros = macros(light), macros(full)
    decls = declarations(preprocess(full))
    known: dict[tuple[str, str], set[str]] = {}
    for file, kind, scope, name in decls:
        if file in light_files:
            known.setdefault((scope, name), set()).add(kind)
    kept = set()
    for file, kind, scope, name in decls:
        if file in light_files:
            continue
        if kind == "using":
            target_scope, _, target = name.rpartition("::")
            name = target
            if known.get((target_scope, target), {"func"}) - {"func"} and "func" not in known[(target_scope, target)]:
                continue  # `using at::Tensor;`: the same type, which the light header has
        elif kind not in ("func", "usingns") and (scope, name) in known:
            continue
        kept.add((kind, scope, name))
    return {
        "macros": sorted(m for m, text in full_macros.items() if light_macros.get(m) != text),
        "decls": sorted([list(d) for d in kept]),
    }


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
    for call in calls:
        spec = _main_flags(cpp_ext, call.extra_cflags, call.include_paths, call.with_cuda)
        folder = fast_dir / spec.folder if spec else None
        if spec is None or folder.exists():
            continue
        if build_pch(spec, folder, timeout_s):
            made.append(folder.name)
    light = _light_dir(cpp_ext, fast_dir) if device == "cuda" and any(c.with_cuda for c in calls) else None
    if light is not None and not light[0].exists():
        folder, spec = light
        try:
            guard = light_guard(spec.compiler, list(spec.flags), timeout_s)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            made.append(f"no light header: {exc}")  # builds stay plain; the marker keeps it from trying each time
        else:
            _publish(folder, {"torch/extension.h": LIGHT_HEADER.encode(), "guard.json": json.dumps(guard).encode()})
            made.append(folder.name)
    marker = _prepared_marker(solution_file, device, fast_dir)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(made))
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


@contextmanager
def fast_load_inline(fast_dir: Path | None) -> Iterator[None]:
    """In the build child: torch's load_inline, using what `prepare` made for each call.

    Per call: `CPATH` gets the precompiled header made for the call's `main.cpp` flags, when there is
    one; a CUDA unit that the guard lets through gets the light header first in nvcc's include path; a
    build that fails in a CUDA unit built so is built again with nothing of that (torch's versioner as
    it was before the first try, so the module keeps its name).
    """
    if fast_dir is None:
        yield
        return
    import torch.utils.cpp_extension as cpp_ext

    original = cpp_ext.load_inline
    signature = inspect.signature(original)
    light = _light_dir(cpp_ext, fast_dir)
    guard = None
    if light is not None and (light[0] / "guard.json").is_file():
        guard = json.loads((light[0] / "guard.json").read_text())

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
        use_light = guard is not None and "torch/extension.h" in cuda_text and not guard_hits(cuda_text, guard)
        if not use_light:
            with _environ(env):
                return original(*args, **kwargs)
        versions = dict(cpp_ext.JIT_EXTENSION_VERSIONER.entries)
        light_flags = " ".join(filter(None, [f"-I{light[0]}", os.environ.get("NVCC_PREPEND_FLAGS")]))
        try:
            with _environ(env | {"NVCC_PREPEND_FLAGS": light_flags}):
                return original(*args, **kwargs)
        except RuntimeError as exc:
            if not re.search(r"FAILED: \S*\.cuda\.o", str(exc)):
                raise
        print(LIGHT_FAILED, flush=True)
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
