"""Static rules for the calls that build the extension: `load_inline(...)` and `load(...)`.

Every C++/CUDA source a single-file solution compiles must be known without running the file:
a string literal, a name bound once to one, or `+`/f-string/list combinations of such. The text
is then handed to `policy_cpp.check_cpp`, with line numbers mapped back into the Python file.
Compiler and linker flags must be literal and on an allow-list; `load()` may compile only the
solution's own kernel files; arguments that redirect the build (build_directory, **kwargs) are
refused.

What this does not protect against: code the extension obtains at run time by other means
(files, network, Python callbacks) is the business of the other rules and of the sandbox.
"""

from __future__ import annotations

import ast
import bisect
import re

from cuda_agent.judge.policy import cpp as policy_cpp
from cuda_agent.judge.policy.facts import ModuleFacts
from cuda_agent.judge.solution import SolutionSource
from cuda_agent.types import Violation

ADVICE = {
    "dynamic_code": "pass C++ sources and flags as string literals (or names bound once to them) straight to "
    "load_inline/load",
    "file_or_network_access": "let the judge choose where the extension is built",
    "forbidden_library": "compile only your own kernel files with the allowed flags",
}
# Parameter names in signature order, so positional arguments can be named (torch 2.9-2.14).
LOAD_INLINE_PARAMS = tuple(
    "name cpp_sources cuda_sources sycl_sources functions extra_cflags extra_cuda_cflags extra_sycl_cflags "
    "extra_ldflags extra_include_paths build_directory verbose with_cuda with_sycl is_python_module "
    "with_pytorch_error_handling keep_intermediates use_pch no_implicit_headers".split()
)
_LOAD_PARAMS = tuple(
    "name sources extra_cflags extra_cuda_cflags extra_sycl_cflags extra_ldflags extra_include_paths "
    "build_directory verbose with_cuda with_sycl is_python_module is_standalone keep_intermediates".split()
)
_HARMLESS_PARAMS = frozenset(
    "name functions verbose with_cuda is_python_module with_pytorch_error_handling keep_intermediates use_pch "
    "no_implicit_headers".split()
)
_FLAG_PARAMS = ("extra_cflags", "extra_cuda_cflags", "extra_ldflags", "extra_include_paths")

Piece = tuple[str, int]
"""A fragment of a statically known string and the line it starts on."""


def check_builds(
    facts: ModuleFacts, solution: SolutionSource, strict: bool, *, kernelbench: bool = False
) -> list[Violation]:
    """load_inline/load calls: sources must be literal, flags allowed, files the solution's own."""
    found = []
    headers = {path.rsplit("/", 1)[-1] for path in solution.sources} | {"binding_registry.h"}
    for call in ast.walk(facts.tree):
        if not facts.is_builder_call(call):
            continue
        assert isinstance(call, ast.Call)
        where = facts.where(call)
        inline = facts.qualname(call.func) == "torch.utils.cpp_extension.load_inline"
        arguments, problems = bind_arguments(call, LOAD_INLINE_PARAMS if inline else _LOAD_PARAMS)
        found += [_found(rule, where, what) for rule, what in problems]
        for param, value in arguments.items():
            if param in ("cpp_sources", "cuda_sources") or (param == "sources" and not inline):
                found += _check_source_argument(facts, solution, param, value, strict, headers, kernelbench)
            elif param in _FLAG_PARAMS:
                found += _check_flag_argument(facts, param, value)
    return found


def bind_arguments(call: ast.Call, params: tuple[str, ...]) -> tuple[dict[str, ast.expr], list[tuple[str, str]]]:
    """A builder call's arguments by parameter name (`params` in signature order), and what the policy refuses
    in how they are passed: (rule, what) pairs."""
    arguments: dict[str, ast.expr] = {}
    problems = []
    for index, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred) or index >= len(params):
            problems.append(("dynamic_code", "passes positional arguments the policy cannot read"))
        else:
            arguments[params[index]] = arg
    for keyword in call.keywords:
        if keyword.arg is None:
            problems.append(("dynamic_code", "passes **kwargs to the extension builder"))
        elif keyword.arg == "build_directory":
            problems.append(("file_or_network_access", "sets build_directory, which writes outside the judge's cache"))
        elif keyword.arg not in params:
            problems.append(("dynamic_code", f"passes the unknown argument {keyword.arg}="))
        else:
            arguments[keyword.arg] = keyword.value
    for param in sorted(
        set(arguments) - _HARMLESS_PARAMS - set(_FLAG_PARAMS) - {"cpp_sources", "cuda_sources", "sources"}
    ):
        problems.append(("dynamic_code", f"passes {param}=, which the policy does not allow"))
    return arguments, problems


def _check_source_argument(
    facts: ModuleFacts,
    solution: SolutionSource,
    param: str,
    value: ast.expr,
    strict: bool,
    headers: set[str],
    kernelbench: bool,
) -> list[Violation]:
    where = facts.where(value)
    items = _static_list(facts, value)
    if items is None:
        return [_found("dynamic_code", where, f"{param} is not a string literal or a name bound once to one")]
    if param == "sources":  # load(): paths of files, which must be the solution's own kernel files
        paths = ["".join(text for text, _ in item) for item in items]
        return [
            _found("forbidden_library", where, f"compiles {path!r}, which is not one of the solution's kernel files")
            for path in paths
            if path.removeprefix("./") not in solution.sources
        ]
    pieces: list[Piece] = []
    for item in items:
        pieces += [*item, ("\n", item[-1][1] if item else value.lineno)]
    text = "".join(piece for piece, _ in pieces)
    where = _pieces_where(facts.name, pieces)
    return policy_cpp.check_cpp(text, where, strict_precision=strict, local_headers=headers, kernelbench=kernelbench)


def _check_flag_argument(facts: ModuleFacts, param: str, value: ast.expr) -> list[Violation]:
    items = _static_list(facts, value)
    if items is None:
        return [_found("dynamic_code", facts.where(value), f"{param} is not a list of string literals")]
    flags = [
        ("".join(text for text, _ in item), param, f"{facts.name}:{item[0][1] if item else value.lineno}")
        for item in items
    ]
    if param != "extra_include_paths":
        return policy_cpp.check_build_flags(flags)
    return [
        _found("forbidden_library", where, f"adds the include path {path!r}")
        for path, _, where in flags
        if ".." in path or (path.startswith("/") and not re.search(r"cuda|CUDA|cudnn", path))
    ]


def _pieces_where(name: str, pieces: list[Piece]) -> policy_cpp.Where:
    starts, offset = [], 0
    for text, _ in pieces:
        starts.append(offset)
        offset += len(text)

    def where(position: int) -> str:
        index = max(bisect.bisect_right(starts, position) - 1, 0)
        text, line = pieces[index]
        return f"{name}:{line + text.count(chr(10), 0, position - starts[index])}"

    return where


def _static_list(facts: ModuleFacts, node: ast.expr, depth: int = 0) -> list[list[Piece]] | None:
    """The strings of a list/tuple (or a single string) known without running the file; else None."""
    if depth > 20:
        return None
    if isinstance(node, ast.Constant) and node.value is None:
        return []
    if isinstance(node, ast.List | ast.Tuple):
        items: list[list[Piece]] = []
        for element in node.elts:
            more = (
                _static_list(facts, element.value, depth + 1)
                if isinstance(element, ast.Starred)
                else _wrap(_static_str(facts, element, depth + 1))
            )
            if more is None:
                return None
            items += more
        return items
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _static_list(facts, node.left, depth + 1), _static_list(facts, node.right, depth + 1)
        if left is not None and right is not None and not _is_str(facts, node):
            return left + right
    if isinstance(node, ast.Name) and _single_value(facts, node.id) is not None:
        return _static_list(facts, _single_value(facts, node.id), depth + 1)  # type: ignore[arg-type]
    return _wrap(_static_str(facts, node, depth + 1))


def _static_str(facts: ModuleFacts, node: ast.expr, depth: int = 0) -> list[Piece] | None:
    """The pieces of a string known without running the file (literals, + and f-strings of such); else None."""
    if depth > 20:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [(node.value, node.lineno)]
    if facts.qualname(node) == "torch.utils.cpp_extension.CUDA_HOME":
        return [("<CUDA_HOME>", node.lineno)]
    if isinstance(node, ast.Name) and _single_value(facts, node.id) is not None:
        return _static_str(facts, _single_value(facts, node.id), depth + 1)  # type: ignore[arg-type]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _static_str(facts, node.left, depth + 1), _static_str(facts, node.right, depth + 1)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.JoinedStr):
        pieces: list[Piece] = []
        for part in node.values:
            simple = isinstance(part, ast.FormattedValue) and part.conversion == -1 and part.format_spec is None
            more = _static_str(facts, part.value if simple else part, depth + 1)  # type: ignore[attr-defined]
            if more is None:
                return None
            pieces += more
        return pieces
    return None


def _wrap(pieces: list[Piece] | None) -> list[list[Piece]] | None:
    return None if pieces is None else [pieces]


def _is_str(facts: ModuleFacts, node: ast.expr) -> bool:
    return _static_str(facts, node) is not None


def _single_value(facts: ModuleFacts, name: str) -> ast.expr | None:
    values = facts.bindings.get(name, [])
    return values[0] if len(values) == 1 and isinstance(values[0], ast.expr) else None


def _found(rule: str, where: str, what: str) -> Violation:
    return Violation(check=rule, message=f"{where}: {what}; {ADVICE[rule]}.")
