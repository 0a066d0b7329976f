"""Static rules for Triton solutions: what a `@triton.jit` kernel may reach, and how the rest of the file uses Triton.

A Triton solution's kernels are module-level functions decorated with `@triton.jit` (optionally under
`@triton.autotune(configs=[...], key=[...])` or `@triton.heuristics({...})`); forward launches them as
`kernel[grid](args...)` (forward.py counts such a launch as a call of the candidate's own code, as it counts a
call of a compiled extension). Triton's GPU compiler refuses most Python in a kernel body, but the CPU judge runs
kernels under Triton's interpreter (`TRITON_INTERPRET=1`), where a kernel body is plain Python that could call
torch or keep a cache; so the body rules here hold on every device:

- a kernel body reaches only `triton.language` (`tl.*`), its own parameters and locals, other kernels,
  module-level numbers and a few builtins (`range`, `min`, `max`, ...); no nested functions, lambdas, imports,
  `global`, `try` or `with`;
- `triton.*` outside the language is limited to `jit`, `autotune`, `heuristics`, `Config`, `cdiv` and
  `next_power_of_2`: Triton's runtime, compiler, settings (`triton.knobs`), cache and benchmarker are what the
  judge's own launches and timings go through;
- autotune takes only configs (no hooks), a key and argument names to reset or restore; a heuristic is a lambda of
  numbers; a kernel object is only launched (`k[grid](...)`) or called from another kernel, never read or patched;
- in a float32 task, no fp16/bf16/fp8 types and every `tl.dot` passes `input_precision="ieee"` (Triton's default
  for float32 operands is TF32 on the GPU).

What this does not protect against: values decided at run time (a config that skips work on the checked shapes, a
`tl.constexpr` that specialises on a value, a kernel that writes only part of its output); those meet the
correctness checks on fresh inputs, the timed calls judged at random and the recheck after timing, and the
launch count the candidate's process reports (child/shim.py).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from cuda_agent.judge.policy.facts import ModuleFacts
from cuda_agent.types import Violation

RULES = {
    "triton_kernel": "A @triton.jit kernel reaches something other than triton.language, its arguments, other "
    "kernels and module-level numbers, or a kernel object is used other than by launching it.",
    "triton_internals": "Triton's runtime, compiler, settings, cache or benchmarker, or autotune/config hooks.",
}
ADVICE = {
    "triton_kernel": "in a kernel use only tl.* (triton.language), the kernel's parameters and locals, other "
    "@triton.jit functions and module-level numbers; outside kernels only launch them as kernel[grid](...)",
    "triton_internals": "of triton use only jit, autotune(configs=, key=), heuristics, Config, cdiv, next_power_of_2 "
    "and triton.language",
    "precision_downcast": "compute a float32 task in float32 (tl.dot(a, b, input_precision='ieee'))",
}
KERNELBENCH_DIFFERENCES = {
    "triton_kernel": "KernelBench does not look; under Triton's interpreter (the CPU judge) a kernel body is plain "
    "Python that could compute with torch or keep results between calls",
    "triton_internals": "KernelBench does not look; Triton's cache, settings, launcher and benchmarker are what the "
    "judge's launches and timings go through",
}
"""Why the kernelbench policy keeps these rules (policy.KERNELBENCH_DIFFERENCES)."""
MODULES = frozenset({"triton", "triton.language", "triton.language.extra", "triton.language.extra.libdevice"})
"""Modules a Triton solution may import (`import triton.language as tl`)."""
ALLOWED_FROM: dict[str, frozenset[str] | None] = {
    "triton": frozenset({"jit", "autotune", "heuristics", "Config", "cdiv", "next_power_of_2", "language"}),
    "triton.language": None,
    "triton.language.extra": frozenset({"libdevice"}),
}
_PUBLIC = re.compile(r"triton\.(jit|autotune|heuristics|Config|cdiv|next_power_of_2)|triton\.language(\..*)?|triton")
_DECORATORS = frozenset({"triton.jit", "triton.autotune", "triton.heuristics"})
_AUTOTUNE_KEYWORDS = frozenset({"configs", "key", "reset_to_zero", "restore_value"})
_CONFIG_KEYWORDS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg"})
_KERNEL_BUILTINS = frozenset({"range", "min", "max", "len", "int", "float", "bool", "abs"})
_REDUCED = re.compile(r"triton\.language\.(float16|bfloat16|float8\w*)")


def allowed_decorator(facts: ModuleFacts, node: ast.AST, name: str | None) -> bool:
    """Triton's decorators are allowed on the module-level kernels alone (their arguments are `check_triton`'s)."""
    return name in _DECORATORS and isinstance(node, ast.FunctionDef) and node.name in facts.triton_kernels


def check_triton(facts: ModuleFacts, strict: bool) -> list[Violation]:
    """Every Triton rule (module docstring) over a parsed solution; empty for a file that does not use Triton.

    Args:
        facts: the parsed solution.
        strict: the task is float32 (reduced-precision types and TF32 dots are refused).
    """
    found: list[tuple[str, ast.AST, str]] = []
    kernels = {name: facts.functions[name] for name in facts.triton_kernels if name in facts.functions}
    for kernel in kernels.values():
        found += [(rule, node, what) for rule, node, what in _kernel_findings(facts, kernel)]
        for decorator in kernel.decorator_list:
            found += [("triton_internals", decorator, what) for what in _decorator_findings(facts, decorator)]
    inside = {id(node) for kernel in kernels.values() for node in ast.walk(kernel)}
    for node in ast.walk(facts.tree):
        dotted = facts.qualname(node) if isinstance(node, ast.Attribute | ast.Name) else None
        if dotted and dotted.startswith("triton") and not _PUBLIC.fullmatch(dotted) and _outermost(facts, node):
            found.append(("triton_internals", node, f"uses `{dotted}`"))
        if strict and dotted and _REDUCED.fullmatch(dotted):
            found.append(("precision_downcast", node, f"uses `{dotted}` in a float32 task"))
        if strict and isinstance(node, ast.Call) and facts.qualname(node.func) == "triton.language.dot":
            ieee = any(
                (k.arg == "input_precision" and _constant(k.value) == "ieee")
                or (k.arg == "allow_tf32" and _constant(k.value) is False)
                for k in node.keywords
            )
            if not ieee:
                found.append(("precision_downcast", node, "calls tl.dot without input_precision='ieee' (TF32)"))
        if isinstance(node, ast.Name) and node.id in kernels and id(node) not in inside:
            if not _is_launch(facts, node):
                found.append(("triton_kernel", node, f"uses the kernel `{node.id}` other than as {node.id}[grid](...)"))
    return [
        Violation(check=rule, message=f"{facts.where(node)}: {what}; {ADVICE[rule]}.") for rule, node, what in found
    ]


def launched_kernel(facts: ModuleFacts, call: ast.Call, shadowed: frozenset[str]) -> str | None:
    """The kernel a call launches (`kernel[grid](...)`), or None; for forward's rules (forward.py)."""
    func = call.func
    if isinstance(func, ast.Subscript) and isinstance(func.value, ast.Name):
        name = func.value.id
        if name in facts.triton_kernels and name not in shadowed:
            return name
    return None


def _is_launch(facts: ModuleFacts, node: ast.Name) -> bool:
    parent = facts.parents.get(id(node))
    if isinstance(parent, ast.Subscript) and parent.value is node:
        call = facts.parents.get(id(parent))
        return isinstance(call, ast.Call) and call.func is parent
    return False


def _outermost(facts: ModuleFacts, node: ast.AST) -> bool:
    parent = facts.parents.get(id(node))
    return not (isinstance(parent, ast.Attribute) and parent.value is node)


def _kernel_findings(facts: ModuleFacts, kernel: ast.FunctionDef) -> Iterator[tuple[str, ast.AST, str]]:
    """A kernel body's reach: the names it loads and the calls it makes (module docstring)."""
    args = kernel.args
    local = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    local |= {n.id for n in ast.walk(kernel) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    allowed = local | set(facts.triton_kernels) | facts.int_globals | _KERNEL_BUILTINS
    body = [node for stmt in [*kernel.body, *args.defaults, *args.kw_defaults] if stmt for node in ast.walk(stmt)]
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            yield "triton_kernel", node, f"defines a function or class inside the kernel {kernel.name}"
        elif isinstance(node, ast.Import | ast.ImportFrom | ast.Global | ast.Nonlocal | ast.Try | ast.With):
            what = type(node).__name__.lower()
            yield "triton_kernel", node, f"uses a `{what}` statement inside the kernel {kernel.name}"
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in allowed:
            if not (facts.qualname(node) or "").startswith("triton"):  # triton's own names: `triton_internals`
                yield "triton_kernel", node, f"reaches `{node.id}` from the kernel {kernel.name}"


def _decorator_findings(facts: ModuleFacts, decorator: ast.expr) -> Iterator[str]:
    if not isinstance(decorator, ast.Call):
        return
    name = facts.qualname(decorator.func)
    if name == "triton.jit":
        yield from (f"passes `{k.arg}=` to triton.jit" for k in decorator.keywords)
    elif name == "triton.autotune":
        for keyword in decorator.keywords:
            if keyword.arg not in _AUTOTUNE_KEYWORDS:
                yield f"passes `{keyword.arg}=` to triton.autotune (a hook or a benchmarker of its own)"
        for node in ast.walk(decorator):
            if isinstance(node, ast.Call) and facts.qualname(node.func) == "triton.Config":
                yield from (
                    f"passes `{k.arg}=` to triton.Config" for k in node.keywords if k.arg not in _CONFIG_KEYWORDS
                )
    elif name == "triton.heuristics":
        for node in (n for arg in [*decorator.args, *decorator.keywords] for n in ast.walk(arg)):
            if isinstance(node, ast.Call) and not _number_call(facts, node):
                yield f"calls `{ast.unparse(node.func)[:40]}` in a heuristic (numbers only)"
            elif isinstance(node, ast.Attribute) and facts.qualname(node) is None:
                yield f"reads `.{node.attr}` in a heuristic (numbers only)"


def _number_call(facts: ModuleFacts, call: ast.Call) -> bool:
    name = facts.qualname(call.func)
    if name in ("triton.cdiv", "triton.next_power_of_2") or (name or "").startswith("math."):
        return True
    return isinstance(call.func, ast.Name) and call.func.id in ("min", "max", "int", "abs")


def _constant(node: ast.AST) -> object:
    return node.value if isinstance(node, ast.Constant) else None
