"""What torch's headers declare and what a CUDA unit reaches of it: the guards of the judge's fast build
(judge/fast_build.py), which let a unit compile with fewer of torch's headers only where that cannot change it.

Two stand-ins, each with its guard, made once per machine, torch and flag set from the preprocessed headers:
- the light header stands in for `<torch/extension.h>` with `<torch/types.h>` alone (pybind11, Python and
  torch's C++ frontend left out);
- the lean header stands in for `<torch/types.h>` too: ATen's tensor, options, dispatch and error headers
  without `ATen/Functions.h` (every operator), and, per unit, the operator headers (`ATen/ops/NAME.h`) of the
  operators it names (`lean_plan`). On the H200 the light CUDA unit still took most of a 41.6 s cold build;
  on the 2-core CPU machine L1/19's unit took 88.1 s CPU with torch's headers, 36.6 s light and 19.0 s lean
  (bench/results/cpu-2026-12-05-lean/).

A guard lists the macros and namespace-scope declarations the full headers have and the stand-in lacks; a
unit that names one of them (`guard_hits`) gets more of torch's headers. For the lean header, a declaration
from an operator's header is no obstacle: the unit gets that operator's header.
"""

from __future__ import annotations

import functools
import re
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from cuda_agent.judge.policy.cpp import blank_comments_and_literals

_IMPLICIT_SCOPES = frozenset({"", "at", "c10", "std"})
"""Scopes a unit reaches without naming them: the global one, and those of torch's and std's types (ADL)."""


class UnitNames(NamedTuple):
    """What a C++ unit can look up outside a class."""

    names: set[str]
    """Every identifier not right after `.` or `->`."""
    scopes: set[str]
    """Those before `::`, and those of its `using namespace`."""
    plain: set[str]
    """The names it uses at least once other than right before `::` (a function can be only one of these)."""


def unit_names(source: str) -> UnitNames:
    code = blank_comments_and_literals(source)[1]  # words in comments and literals are not names
    found = list(re.finditer(r"(?<![\w.])(?<!->)\s*([A-Za-z_]\w*)(\s*::)?", code))
    scopes = set(re.findall(r"([A-Za-z_]\w*)\s*::", code))
    for used in re.findall(r"using\s+namespace\s+([\w:\s]+);", code):
        scopes.update(re.findall(r"\w+", used))
    return UnitNames({m.group(1) for m in found}, scopes, {m.group(1) for m in found if not m.group(2)})


_SILENT_KINDS = frozenset({"func", "using", "usingns"})
"""Declarations that can change what a unit that compiles means (overloads, using-declarations and
-directives); a new type or variable of a name makes a unit that uses it fail to compile instead."""
_HIDING_SCOPES = frozenset({"", "torch", "at"})
"""Scopes with using-directives, where a new namespace hides what `S::name` found before (`torch::cuda`)."""


def _reached(unit: UnitNames, decls: Iterable[list]) -> Iterator[tuple[list, str]]:
    """The guard's declarations that a unit with these names may reach, each with a label."""
    names, scopes = unit.names, unit.scopes
    for entry in decls:
        kind, scope, name = entry[:3]
        # Anything the unit names through an extra declaration (`py::x`, `pybind11::object`) would not
        # compile with the light header: no light try. Elsewhere only what can change a unit that compiles.
        explicit = scope == "" or all(part in scopes for part in scope.split("::"))
        named = explicit and (name in scopes or scope != "")
        if not named and kind not in _SILENT_KINDS and not (kind == "ns" and scope in _HIDING_SCOPES):
            continue
        if kind == "func" and name not in unit.plain:
            continue  # `std::min` calls no function named std
        if name in names and all(part in scopes or part in _IMPLICIT_SCOPES for part in scope.split("::")):
            yield entry, (f"{kind} {scope}::{name}" if scope else f"{kind} ::{name}")


def guard_hits(source: str, guard: dict[str, list]) -> list[str]:
    """What in `source` the light header would leave out or could change: macros that the extra headers
    define, and functions, using-declarations or namespaces they declare in a scope the unit reaches (one
    it names before `::` or in `using namespace`, or an implicit one)."""
    unit = unit_names(source)
    hits = [f"macro {m}" for m in guard["macros"] if m in unit.names]
    return hits + [label for _, label in _reached(unit, guard["decls"])]


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


def declarations(
    preprocessed: str, signatures: dict[tuple[str, str, str], set[str]] | None = None
) -> set[tuple[str, str, str, str]]:
    """(file, kind, scope, name) of each namespace-scope declaration in a preprocessed unit; with `signatures`,
    each function's declaration text (attributes left out) is added there under (file, scope, name).

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
            _note(stmt, where, scope, found, signatures)
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


def _note(
    stmt: list[str],
    where: str,
    scope: str,
    found: set[tuple[str, str, str, str]],
    signatures: dict[tuple[str, str, str], set[str]] | None,
) -> None:
    """Add what one statement declares to `found`, and its functions' declaration text to `signatures`."""
    declared = _declared(stmt)
    found.update((where, kind, scope, name) for kind, name in declared)
    if signatures is not None:
        text = " ".join(_without_brackets(stmt))
        for _kind, name in filter(lambda d: d[0] == "func", declared):
            signatures.setdefault((where, scope, name), set()).add(text)


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


@functools.lru_cache(maxsize=8)
def _preprocess(compiler: str, flags: tuple[str, ...], text: str, timeout_s: float, *extra: str) -> str:
    """`text` through the compiler's preprocessor (kept: the light and the lean guard both read `<torch/types.h>`)."""
    argv = [compiler, *flags, *extra, "-E", "-x", "c++", "-"]
    done = subprocess.run(argv, input=text, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"preprocessing torch's headers failed: {done.stderr.strip()[-500:]}")
    return done.stdout


@functools.lru_cache(maxsize=4)
def _parsed(
    compiler: str, flags: tuple[str, ...], text: str, timeout_s: float
) -> tuple[frozenset[tuple[str, str, str, str]], dict[tuple[str, str, str], set[str]], frozenset[str]]:
    """`declarations` of the preprocessed `text` with their functions' signatures, and the files it includes."""
    preprocessed = _preprocess(compiler, flags, text, timeout_s)
    signatures: dict[tuple[str, str, str], set[str]] = {}
    found = frozenset(declarations(preprocessed, signatures))
    return found, signatures, frozenset(m.group(2) for m in _MARKER.finditer(preprocessed))


def _difference(
    compiler: str, flags: list[str], light: str, full: str, timeout_s: float, copied: str = ""
) -> tuple[list[str], set[tuple[str, str, str, str]]]:
    """The macros that `full` defines or changes against `light`, and its namespace-scope declarations
    (file, kind, scope, name) from files that `light` does not include (nor copies: `copied`, a file whose
    text less its includes `light` has).

    Kept: every function (a new overload of a name the light header has too changes overload
    resolution), and any other name where the light header has nothing of that name in that scope;
    a using-declaration counts unless it names a type the light header declares there.
    """
    key = (compiler, tuple(flags))

    def macros(text: str) -> dict[str, str]:
        defines = _preprocess(*key, text, timeout_s, "-dM").splitlines()
        lines = [line.split(None, 2) for line in defines if line.startswith("#define")]
        return {parts[1].split("(")[0]: " ".join(parts[1:]) for parts in lines if len(parts) > 1}

    light_macros, full_macros = macros(light), macros(full)
    decls, full_signatures, _ = _parsed(*key, full, timeout_s)
    light_parsed, light_signatures, light_files = _parsed(*key, light, timeout_s)
    light_decls = {(kind, scope, name) for _, kind, scope, name in light_parsed}
    light_functions = {(scope, name, text) for (_, scope, name), texts in light_signatures.items() for text in texts}
    known: dict[tuple[str, str], set[str]] = {}
    for kind, scope, name in light_decls:
        known.setdefault((scope, name), set()).add(kind)
    kept = set()
    for file, kind, scope, name in decls:
        if file in light_files or (copied and file.endswith(copied) and (kind, scope, name) in light_decls):
            continue
        if kind == "usingns" and (kind, scope, name) in light_decls:
            continue  # the same using-directive
        texts = full_signatures.get((file, scope, name), {""}) if kind == "func" else {""}
        if kind == "func" and all((scope, name, text) in light_functions for text in texts):
            continue  # declared again as the light header declares it (`at::launch` in torch's JIT headers)
        if kind == "using":
            target_scope, _, target = name.rpartition("::")
            name = target
            if known.get((target_scope, target), {"func"}) - {"func"} and "func" not in known[(target_scope, target)]:
                continue  # `using at::Tensor;`: the same type, which the light header has
        elif kind not in ("func", "usingns") and (scope, name) in known:
            continue
        kept.add((file, kind, scope, name))
    return sorted(m for m, text in full_macros.items() if light_macros.get(m) != text), kept


TYPES_H, EXTENSION_H = "#include <torch/types.h>\n", "#include <torch/extension.h>\n"


def light_guard(compiler: str, flags: list[str], timeout_s: float = 600.0) -> dict[str, list]:
    """What `<torch/extension.h>` adds to `<torch/types.h>`: the macros it defines or changes, and the
    namespace-scope declarations of the headers that only it includes."""
    macros, kept = _difference(compiler, flags, TYPES_H, TYPES_H + EXTENSION_H, timeout_s)
    return {"macros": macros, "decls": sorted([list(d) for d in {(k, s, n) for _, k, s, n in kept}])}


LEAN_INCLUDES = (
    # ATen/ATen.h's headers less those that bring every operator (Functions.h, and TensorOperators.h,
    # TensorIndexing.h and ScalarOps.h, which include it), what each operator's header includes, and a few
    # that <torch/types.h> has by other ways (ATen/Parallel.h, three of std's)
    "ATen/Tensor.h ATen/Context.h ATen/Device.h ATen/DeviceGuard.h ATen/DimVector.h ATen/Dispatch.h "
    "ATen/Formatting.h ATen/TensorGeometry.h ATen/TensorUtils.h ATen/TracerMode.h ATen/Parallel.h "
    "ATen/core/ATenGeneral.h ATen/core/Generator.h ATen/core/Reduction.h ATen/core/Scalar.h ATen/core/UnsafeFromTH.h "
    "c10/core/Allocator.h c10/core/InferenceMode.h c10/core/Layout.h c10/core/Storage.h c10/core/TensorOptions.h "
    "c10/util/Exception.h optional bitset list thread"
).split()
_LEAN_TORCH = """\
namespace torch {  // <torch/types.h>'s own declarations
using namespace at;
using std::nullopt;
using std::optional;
using Dtype = at::ScalarType;
constexpr auto kUInt8 = at::kByte;
constexpr auto kInt8 = at::kChar;
constexpr auto kInt16 = at::kShort;
constexpr auto kInt32 = at::kInt;
constexpr auto kInt64 = at::kLong;
constexpr auto kUInt16 = at::kUInt16;
constexpr auto kUInt32 = at::kUInt32;
constexpr auto kUInt64 = at::kUInt64;
constexpr auto kFloat16 = at::kHalf;
constexpr auto kFloat32 = at::kFloat;
constexpr auto kFloat64 = at::kDouble;
constexpr auto kU8 = kUInt8;
constexpr auto kU16 = kUInt16;
constexpr auto kU32 = kUInt32;
constexpr auto kU64 = kUInt64;
constexpr auto kI8 = kInt8;
constexpr auto kI16 = kInt16;
constexpr auto kI32 = kInt32;
constexpr auto kI64 = kInt64;
constexpr auto kF16 = kFloat16;
constexpr auto kF32 = kFloat32;
constexpr auto kF64 = kFloat64;
}  // namespace torch
"""


def lean_base(ops_dir: Path) -> str:
    """The lean header less any unit's operators: LEAN_INCLUDES, then ATen/Functions.h's own functions
    (`at::size(t, d)`, `at::std(t, int)`, ...; its operator includes dropped, but those of the operators
    its functions call), then torch's namespace as <torch/types.h> makes it."""
    own = [line for line in (ops_dir.parent / "Functions.h").read_text().splitlines() if "<ATen/ops/" not in line]
    called = sorted({op for op in re.findall(r"at::(\w+)\(", "\n".join(own)) if (ops_dir / f"{op}.h").is_file()})
    lines = [
        "// cuda-agent judge, fast build (cuda_agent/judge/header_guard.py): stands in for <torch/types.h> and",
        "// <torch/extension.h> in a CUDA unit that reaches nothing else of what they declare than its operators.",
        "#pragma once",
        *(f"#include <{header}>" for header in LEAN_INCLUDES),
        *(f"#include <ATen/ops/{op}.h>" for op in called),
        "// ATen/Functions.h, less the operators' headers:",
        *own,
    ]
    return "\n".join(lines) + "\n" + _LEAN_TORCH


def lean_header(base: str, ops: Iterable[str]) -> str:
    """The lean stand-in for `<torch/types.h>` with these operators' headers."""
    return base + "".join(f"#include <ATen/ops/{op}.h>\n" for op in sorted(set(ops)))


_OP_FILE = re.compile(r"/ATen/ops/(\w+)\.h$")
_FACTORIES = "/torch/csrc/autograd/generated/variable_factories.h"


def _operator(file: str, kind: str, name: str, ops_dir: Path) -> str:
    """The operator whose header declares this (its name), or "" where no operator's header does.

    torch's own factories (`torch::empty_like`, autograd's wrappers of ATen's) count as their operator's:
    without them the unit's `torch::empty_like` finds `at::empty_like` (torch's namespace uses at's), which
    makes the same tensor unless asked for `requires_grad`, which `lean_plan` refuses."""
    match = _OP_FILE.search(file)
    if match:
        op = match.group(1)
        if op.endswith("_ops") and (ops_dir / f"{op[:-4]}.h").is_file():
            op = op[:-4]  # ATen/ops/NAME_ops.h, which ATen/ops/NAME.h includes
        return op if (ops_dir / f"{op}.h").is_file() else ""
    if file.endswith(_FACTORIES) and kind == "func" and (ops_dir / f"{name}.h").is_file():
        return name
    return ""


_LEAN_PROBE = """
torch::Tensor cuda_agent_probe(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "float32 only");
    auto y = torch::empty_like(x);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "probe", [&] { y.data_ptr<scalar_t>()[0] = scalar_t(at::size(x, 0)); });
    return y;
}
"""


def lean_guard(compiler: str, flags: list[str], ops_dir: Path, timeout_s: float = 600.0) -> dict:
    """What `<torch/types.h>` declares beyond the lean header (`<torch/extension.h>`'s own additions are the
    light guard's), each declaration with the operators whose headers declare it (none where another header
    does: a unit that reaches it is not built lean), and the lean header's base."""
    base = lean_base(ops_dir)
    # A base that does not compile (another torch's headers) would fail every lean try: none then.
    probe = lean_header(base, ["empty_like"]) + _LEAN_PROBE
    argv = [compiler, *flags, "-fsyntax-only", "-x", "c++", "-"]
    done = subprocess.run(argv, input=probe, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the lean header does not compile: {done.stderr.strip()[-500:]}")
    macros, kept = _difference(compiler, flags, base, TYPES_H, timeout_s, copied="/ATen/Functions.h")
    ops: dict[tuple[str, str, str], set[str]] = {}
    for file, kind, scope, name in kept:
        ops.setdefault((kind, scope, name), set()).add(_operator(file, kind, name, ops_dir))
    decls = [[*key, [] if "" in found else sorted(found)] for key, found in ops.items()]
    return {"macros": macros, "decls": sorted(decls), "base": base}


def lean_plan(source: str, guard: dict) -> tuple[list[str], list[str]]:
    """The operator headers a lean build of `source` needs, and what keeps it from a lean build (empty: none).

    Only what could change a unit that compiles counts (functions, using-declarations and -directives, and
    namespaces that hide: `_reached`'s silent kinds): a type or variable the lean header lacks makes the unit
    fail to compile, and the build then goes on with more of torch's headers."""
    unit = unit_names(source)
    refused = [f"macro {m}" for m in guard["macros"] if m in unit.names]
    if re.search(r"\brequires_grad\b", blank_comments_and_literals(source)[1]):  # `options.requires_grad(true)`
        refused.append("requires_grad (torch's factories honour it, ATen's do not)")
    ops: set[str] = set()
    for (kind, scope, _name, found), label in _reached(unit, guard["decls"]):
        if kind not in _SILENT_KINDS and not (kind == "ns" and scope in _HIDING_SCOPES):
            continue
        if found:
            ops.update(found)
        else:
            refused.append(label)
    return sorted(ops), refused
