"""The judge's static policy stage: reject a candidate for what its source says, before anything runs.

`check_policy(solution, device, policy=...)` parses the Python file with `ast` and reads the C++/CUDA
code as text: for a single-file solution, the strings it passes to `load_inline`; for a workspace,
the files under `kernels/`. It returns one `Violation` per broken rule (see `RULES`); an empty list
means the candidate may be built. No candidate code runs here.

What it checks under the 'cuda-agent' policy (SKILL.md's rules): that ModelNew is a plain nn.Module
whose forward reaches only the compiled extension plus allocation and view helpers; that the file
imports, patches, hooks, threads, streams, reads files or builds code only in allowed ways; that the
C++ uses no torch compute, no libraries beyond cuBLAS (GEMM) and cuDNN (convolution), no side
streams, background threads, persisting-L2 windows or process control; and, for float32 tasks, no
reduced precision. Under 'kernelbench', forward and the C++ may use torch operators and any
header-only CUDA library (`KERNELBENCH_RELAXED`), but forward must still call the extension, and
everything that fakes a speed-up or a result stays forbidden; torch's compiler, its private
internals and dispatch-key guards are refused too, because they would hide torch's work from the
runtime check that the candidate's kernels reach its outputs (runtime.py).

The package: this module (the Python rules and `check_policy`), `facts` (what a parsed file binds),
`forward` (forward's call graph), `build` (load_inline/load arguments), `cpp` (C++/CUDA text) and
`runtime` (the checks that run in the candidate's process).

What it does NOT protect against: anything decided by values at run time. A tensor reaching
torch through a path the text rules cannot see, caching results across calls, reading the
reference's freed memory, mutating inputs, partial or shape-specific computation, precision
that is silently lost, and native code that patches the process below Python are the candidate
worker's business (ATen dispatch tracing, fresh inputs and poisoned memory, snapshots after a
device sync, integrity checks) and the sandbox's (OS isolation). This stage only turns the
common spellings of those hacks into early, actionable rejections.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator

from cuda_agent.judge.policy import build as policy_build
from cuda_agent.judge.policy import cpp as policy_cpp
from cuda_agent.judge.policy import forward as policy_forward
from cuda_agent.judge.policy import triton as policy_triton
from cuda_agent.judge.policy.facts import (
    BUILDERS,
    ModuleFacts,
    assigned_targets,
    collect_facts,
    extension_attributes,
    is_own_attribute,
    names_extension,
)
from cuda_agent.judge.solution import SolutionSource
from cuda_agent.types import Violation

RULES: dict[str, str] = {
    "syntax_error": "The Python file does not parse.",
    "missing_model_new": "There is no top-level `class ModelNew`, or the name is rebound after it.",
    "subclasses_reference": "ModelNew derives from something other than nn.Module (e.g. the reference Model).",
    "forbidden_override": "ModelNew overrides an nn.Module method or a special method other than __init__/forward.",
    "forbidden_import": "An import outside torch, torch.nn, torch.utils.cpp_extension, math, typing, os (to read "
    "the environment), triton (policy/triton.py) and cuda_extension (torch.nn.functional and the reference "
    "included; under kernelbench any torch module).",
    "dynamic_code": "eval/exec/compile/__import__, getattr/setattr with computed names, globals()/vars(), dunder "
    "access, decorators, C++ sources and flags that are not plain literals, or C++ names bound around the rules "
    "(asm labels, alias attributes, declarations inside torch's namespaces).",
    "try_except": "A try statement in forward or a function it calls, contextlib.suppress or an __exit__ method "
    "(a silent fallback on the timed path).",
    "torch_compute_in_forward": "forward (or a function it calls) calls torch or a submodule instead of the "
    "compiled extension, or indexes tensors with tensors.",
    "tensor_arithmetic_in_forward": "forward applies + - * / @ or comparisons to values that may be tensors.",
    "forward_calls_no_kernel": "forward never calls a function of the compiled extension.",
    "lazy_output_hooks": "Tensor subclasses, __torch_function__/__torch_dispatch__, module hooks or __del__.",
    "global_state_change": "Changing process-wide state: torch.backends, torch.set_*, seeds, monkeypatching, "
    "operator registration, device or OpenMP settings.",
    "side_stream": "Work on a CUDA stream or graph other than the current stream.",
    "background_thread": "Work left to a thread, callback or process that outlives the call.",
    "cpp_torch_compute": "C++ that calls torch/ATen compute (ops, tensor methods, tensor operators) instead of "
    "only allocating and checking.",
    "forbidden_library": "Headers, libraries, linker or compiler flags outside the allow-list.",
    "cublas_misuse": "cuBLAS calls other than GEMM, or cuDNN calls other than convolution.",
    "l2_persistence": "Persisting-L2 access windows, limits or evict-last cache policies.",
    "file_or_network_access": "Files, network, sleeping or process control in Python or C++, or the environment "
    "in C++ (Python may read os.environ).",
    "precision_downcast": "fp16/bf16/tf32/fp8 types, flags or math modes in a float32 task.",
    **policy_triton.RULES,
}

# What to do instead, appended to every message of a rule this module reports.
_ADVICE = {
    "missing_model_new": "define `class ModelNew(nn.Module)` once, at the top level",
    "subclasses_reference": "derive ModelNew from nn.Module only and reimplement forward with your kernels",
    "forbidden_override": "define only __init__, forward and your own helper methods on ModelNew",
    "forbidden_import": "import only torch, torch.nn (not functional), torch.utils.cpp_extension (load_inline, "
    "load, CUDA_HOME, include_paths, library_paths), math, typing, os and, in a workspace, cuda_extension",
    "dynamic_code": "write code and C++ sources out as literals; use plain attribute access and calls, decorators "
    "only @staticmethod/@classmethod/@torch.no_grad()",
    "try_except": "let errors in forward propagate (check preconditions with if/raise or TORCH_CHECK); a try is "
    "fine at module level or in __init__, e.g. around parsing an environment variable",
    "lazy_output_hooks": "return ordinary tensors that your kernels have fully written",
    "global_state_change": "leave torch's flags, seeds and functions as they are",
    "side_stream": "launch on the current stream only",
    "background_thread": "finish all work before forward returns",
    "file_or_network_access": "compute from forward's arguments only; of os, only os.environ.get/os.getenv/os.cpu_count",
    "precision_downcast": "compute a float32 task in float32",
    "forbidden_library": "load native code only by compiling your own sources with load_inline/load",
}
_ALLOWED_MODULES = frozenset(
    "torch torch.nn torch.utils.cpp_extension math typing __future__ cuda_extension os".split()
)
_ALLOWED_MODULES |= policy_triton.MODULES
_ALLOWED_FROM: dict[str, frozenset[str] | None] = {
    "torch": frozenset({"nn", "Tensor", "Size", "dtype", "device"}),
    "torch.utils.cpp_extension": frozenset({"load_inline", "load", "CUDA_HOME", "include_paths", "library_paths"}),
    "torch.utils": frozenset({"cpp_extension"}),
    "torch.nn": None,  # anything but functional, checked below
    "math": None,
    "typing": None,
    "__future__": None,
    "cuda_extension": None,
    "os": frozenset({"environ", "getenv", "cpu_count"}),
    **policy_triton.ALLOWED_FROM,
}
POLICIES = ("cuda-agent", "kernelbench")
KERNELBENCH_RELAXED = frozenset(
    {"torch_compute_in_forward", "tensor_arithmetic_in_forward", "cpp_torch_compute", "cublas_misuse"}
)
"""Rules of the cuda-agent policy that the kernelbench policy drops: mixing torch with one's own kernels
(and calling CUDA libraries from C++) is how KernelBench solutions are written. Imports and C++ headers are
widened too (`_kernelbench_module_ok`, cpp.py)."""
KERNELBENCH_DIFFERENCES = {
    "dynamic_code": "KernelBench runs any Python; this judge runs the candidate beside its own checks and refuses "
    "what it cannot read first (private torch names where forward can reach them, computed names, built code), "
    "which can rewrite those checks",
    "global_state_change": "KernelBench does not look; process-wide torch state and torch's private internals change "
    "what the reference and the timer see, or hide torch's work from the check that your kernels make the outputs",
    "forbidden_library": "KernelBench builds anything; kernels from torch's compiler or a prebuilt library would count "
    "as yours",
    "forbidden_import": "KernelBench imports anything; modules beyond torch, math, typing and os reach the process, "
    "files or network",
    "file_or_network_access": "KernelBench does not look; files, processes and the network can carry a result in or "
    "reach the judge",
    "lazy_output_hooks": "KernelBench does not look; hooks and tensor subclasses run your code inside the judge's "
    "reading of the outputs, after the clock stopped",
    "background_thread": "KernelBench does not look; work left to a thread runs after the clock stopped",
    "side_stream": "KernelBench times the current stream; work on another one escapes the timer",
    "l2_persistence": "KernelBench does not look; a persisting L2 window carries data from one timed call to the next",
    "forbidden_override": "KernelBench does not look; nn.Module's methods are how the judge moves, copies and calls "
    "the model",
    "precision_downcast": "KernelBench's 1e-2 tolerance lets reduced precision pass; this judge holds a float32 task "
    "to float32 arithmetic",
    **policy_triton.KERNELBENCH_DIFFERENCES,
}
"""Rules of the kernelbench policy that KernelBench's own evaluation does not have, and why this judge keeps them:
a refusal under kernelbench says so, so that a parity report can tell them from KernelBench's own verdict."""
_MODULE_METHODS = frozenset(
    "to cuda cpu float double half bfloat16 type _apply apply eval train state_dict load_state_dict "
    "_load_from_state_dict _save_to_state_dict parameters named_parameters buffers named_buffers children "
    "named_children modules named_modules register_buffer register_parameter register_module add_module "
    "get_submodule get_parameter get_buffer zero_grad requires_grad_ share_memory extra_repr _call_impl "
    "_wrapped_call_impl _get_name".split()
)
_DECORATORS = frozenset({"staticmethod", "classmethod", "torch.no_grad", "torch.inference_mode"})
_SAFE_DUNDERS = frozenset({"__init__", "__name__", "__doc__", "__qualname__"})

# (pattern over an import-rooted dotted name, rule, what it does); strict-precision rules are marked.
_QUALIFIED_RULES: list[tuple[re.Pattern[str], str, str]] = [
    (re.compile(p), rule, what)
    for p, rule, what in [
        (
            r"torch\.(cuda\.)?(Stream|stream|streams|ExternalStream|set_stream|graph|graphs|CUDAGraph"
            r"|make_graphed_callables)(\..*)?",
            "side_stream",
            "uses a CUDA stream or graph",
        ),
        (
            r"torch\.backends(\..*)?|torch\.(set_\w+|manual_seed|seed|use_deterministic_algorithms|random|library)(\..*)?"
            r"|torch\.cuda\.(set_\w+|manual_seed\w*|seed\w*|memory\.set_\w+|tunable)(\..*)?|torch\._C\._set\w*",
            "global_state_change",
            "changes process-wide torch state",
        ),
        (
            # An allocator of its own runs the candidate's code inside every allocation the judge makes (a wrapped
            # CPU allocator can do the work after the clock stopped); a profiler's callbacks run
            # inside the judge's calls.
            r"torch\.cuda\.(memory\.)?(change_current_allocator|CUDAPluggableAllocator|MemPool|use_mem_pool)(\..*)?"
            r"|torch\.(profiler|autograd\.profiler)(\..*)?",
            "global_state_change",
            "replaces torch's allocator or hooks its calls",
        ),
        (
            r"torch\.(multiprocessing|futures|distributed)(\..*)?|torch\.jit\._?fork",
            "background_thread",
            "starts work outside the call",
        ),
        (
            r"torch\.(load|save|from_file|hub|utils\.(?!(cpp_extension|_python_dispatch)\b)\w+|serialization|package|jit\.load|jit\.save)(\..*)?",
            "file_or_network_access",
            "reads or writes files (and unpickles: code runs through torch.serialization)",
        ),
        (r"torch\.(overrides|utils\._python_dispatch)(\..*)?", "lazy_output_hooks", "intercepts torch calls"),
        (r"os\.environ\.(?!get$)\w+.*|os\.putenv|os\.unsetenv", "global_state_change", "changes the environment"),
        (
            r"os\.(?!(environ(\..*)?|getenv|cpu_count)$)\w+.*|os",
            "file_or_network_access",
            "reaches the operating system",
        ),
        (r"torch\.(ops|classes)\.load_library", "forbidden_library", "loads a native library"),
        (
            r"torch\.utils\.cpp_extension\.(?!(load_inline|load|CUDA_HOME|include_paths|library_paths)$)\w+.*",
            "forbidden_import",
            "uses a private or unlisted part of torch.utils.cpp_extension",
        ),
    ]
]
_PRECISION_NAME = re.compile(
    r"torch\.(float16|half|bfloat16|float8\w*|autocast|amp|set_float32_matmul_precision)(\..*)?|torch\.cuda\.amp(\..*)?"
    r"|torch\.backends\..*allow_(tf32|fp16\w*|bf16\w*)"
)
_NAME_RULES = {
    **dict.fromkeys(
        "eval exec compile __import__ globals locals vars __builtins__ __builtin__ breakpoint importlib".split(),
        "dynamic_code",
    ),
    **dict.fromkeys("open exit quit SystemExit KeyboardInterrupt".split(), "file_or_network_access"),
    **dict.fromkeys("TorchDispatchMode TorchFunctionMode".split(), "lazy_output_hooks"),
}
_MODULE_ATTRIBUTES = frozenset(
    """
    sys os builtins importlib gc inspect ctypes subprocess shutil socket marshal pickle runpy posix _thread
    threading multiprocessing types tempfile pathlib io codecs atexit signal faulthandler resource mmap _ctypes
    """.split()
)
"""Standard-library modules that other modules hold as attributes (`torch.sys` is `sys`, `torch.os` is `os`):
`torch.sys.modules` reaches the modules of whatever shares the process (once the judge's timer and comparison),
and `torch.os` the file system. No kernel needs them as attributes."""
_FRAME_ATTRIBUTES = re.compile(
    r"(f_(back|builtins|code|globals|lasti|lineno|locals|trace\w*|generator)|(gi|cr|ag)_\w+|tb_(frame|next|lasti|lineno)"
    r"|co_\w+|func_\w+|im_\w+|_getframe\w*|currentframe|settrace|setprofile|gettrace|getprofile|exc_info)"
)
"""Frames, code objects and tracebacks: a generator's frame (`gi_frame.f_back`) leads to the objects of
whatever called it (the shim's clock and answers), and `f_builtins` to `__import__`."""
_DUNDER = re.compile(r"__\w+__")
_TORCH_NAMESAKES = frozenset({"random", "signal", "math"})
"""torch's own submodules named like standard ones (`torch.random`, `torch.signal`), not modules it holds, and
`triton.language.math` (the standard `math` may be imported anyway)."""
_BUILTIN_KEYS = frozenset("getattr setattr delattr hasattr eval exec compile open vars globals locals".split())
_LAZY_ATTRIBUTES = re.compile(
    r"register_\w*hook|_make_subclass|_make_wrapper_subclass|as_subclass"
    r"|__torch_function__|__torch_dispatch__|__del__"
)
# The judge reads forward's outputs; a container or number protocol of the solution's own would run its code inside
# that read, after the clock stopped (a `list` subclass's `__iter__` can run the kernel). The worker
# reads outputs through the builtins alone (trial.plain_outputs); this names the means.
_PROTOCOL_METHODS = re.compile(
    r"__(iter|next|getitem|len|length_hint|reversed|contains|index|int|float|bool|complex|array\w*|dlpack\w*)__"
)
_CONTAINER_BASES = frozenset("list tuple dict set frozenset".split())
_REDUCED_DTYPES = re.compile(r"(torch\.)?(float16|half|bfloat16|float8\w*)")
# Under kernelbench torch may compute, but not in ways that hide its work from the runtime dataflow check
# (runtime.py): kernels that torch's compiler generates run outside torch's operators, and private
# internals reach dispatch-key guards and mode stacks.
_KERNELBENCH_QUALIFIED_RULES: list[tuple[re.Pattern[str], str, str]] = [
    (
        re.compile(r"torch\.(compile|_dynamo|_inductor|jit|export|fx)(\..*)?"),
        "forbidden_library",
        "lets torch's compiler generate the kernels, which would count as yours",
    ),
    (
        re.compile(r"torch\._(?!_)\w+(\..*)?"),
        "global_state_change",
        "reaches torch's private internals (dispatch keys, modes), which can hide torch's work from the judge",
    ),
]
_KERNELBENCH_MODULES = frozenset({"math", "typing", "__future__", "cuda_extension", "os"}) | policy_triton.MODULES


def check_policy(
    solution: SolutionSource, device: str, *, task_dtypes: set[str] | None = None, policy: str = "cuda-agent"
) -> list[Violation]:
    """Apply every static rule of a policy to a candidate; no candidate code runs.

    Args:
        solution: the candidate's source files.
        device: 'cuda' or 'cpu', the device the candidate will be judged on; the rules are the same
            for both (a CPU solution simply has no CUDA code to trip them) and messages name it.
        task_dtypes: dtypes of the task's inputs and outputs (e.g. {'torch.float32'}); None means
            float32. `precision_downcast` applies unless a reduced-precision float is among them.
        policy: 'cuda-agent' (SKILL.md's rules) or 'kernelbench' (torch may mix with the candidate's kernels).

    Returns:
        The violations in the order found, at most one per rule and location; empty when the
        candidate may be built. A file that does not parse gives only `syntax_error`.
    """
    try:
        tree = ast.parse(solution.python, filename=solution.python_name)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        return [
            _violation(
                "syntax_error",
                f"{solution.python_name}:{line or '?'}",
                f"does not parse ({getattr(exc, 'msg', exc)})",
                "fix the Python syntax",
            )
        ]
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; use one of {', '.join(POLICIES)}")
    kernelbench = policy == "kernelbench"
    facts = collect_facts(tree, solution.python_name)
    strict = task_dtypes is None or not any(_REDUCED_DTYPES.fullmatch(d) for d in task_dtypes)
    forward_found, reached = policy_forward.check_forward(facts, device) if facts.model_new else ([], [])
    construction = _construction_code(facts, reached) if kernelbench else frozenset()
    found = _check_model_new(facts)
    found += _check_imports(facts, kernelbench)
    found += _check_nodes(facts, strict, kernelbench, construction)
    found += policy_build.check_builds(facts, solution, strict, kernelbench=kernelbench)
    found += forward_found + _check_try(facts, reached)
    found += policy_triton.check_triton(facts, strict)
    headers = {path.rsplit("/", 1)[-1] for path in solution.sources} | {"binding_registry.h"}
    for path, text in solution.sources.items():
        where = _file_where(path, text)
        found += policy_cpp.check_cpp(
            text, where, strict_precision=strict, local_headers=headers, kernelbench=kernelbench
        )
    if kernelbench:
        found = [_with_difference(v) for v in found if v.check not in KERNELBENCH_RELAXED]
    # One finding per rule and place is enough to act on; nested expressions would repeat it.
    return list({(v.check, v.message.split(": ", 1)[0]): v for v in reversed(found)}.values())[::-1]


def _with_difference(violation: Violation) -> Violation:
    why = KERNELBENCH_DIFFERENCES.get(violation.check)
    if why is None:
        return violation
    return Violation(check=violation.check, message=f"{violation.message} Differs from KernelBench: {why}.")


def _violation(rule: str, where: str, what: str, allowed: str | None = None) -> Violation:
    return Violation(check=rule, message=f"{where}: {what}; {allowed or _ADVICE[rule]}.")


def _file_where(path: str, text: str) -> policy_cpp.Where:
    return lambda offset: f"{path}:{text.count(chr(10), 0, offset) + 1}"


def _check_model_new(facts: ModuleFacts) -> list[Violation]:
    cls = facts.model_new
    if cls is None:
        return [_violation("missing_model_new", f"{facts.name}:1", "there is no top-level class ModelNew")]
    found = []
    bindings = facts.bindings.get("ModelNew", [])
    if len(bindings) > 1:
        found.append(
            _violation(
                "missing_model_new",
                facts.where(cls),
                f"the name ModelNew is bound {len(bindings)} times (class statements, assignments or imports)",
            )
        )
    if not cls.bases:
        found.append(_violation("subclasses_reference", facts.where(cls), "ModelNew has no base class"))
    for base in cls.bases:
        if facts.qualname(base) != "torch.nn.Module":
            found.append(
                _violation("subclasses_reference", facts.where(base), f"ModelNew derives from `{ast.unparse(base)}`")
            )
    for keyword in cls.keywords:
        found.append(
            _violation(
                "subclasses_reference", facts.where(keyword), f"ModelNew passes `{keyword.arg}=` to its class statement"
            )
        )
    for stmt in cls.body:
        names = [t.id for t, _ in assigned_targets(stmt) if isinstance(t, ast.Name)]
        names += [stmt.name] if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) else []
        for name in names:
            if name in _MODULE_METHODS or (name.startswith("__") and name.endswith("__") and name != "__init__"):
                found.append(_violation("forbidden_override", facts.where(stmt), f"ModelNew defines `{name}`"))
    return found


def _kernelbench_module_ok(name: str) -> bool:
    return name == "torch" or name.startswith("torch.") or name in _KERNELBENCH_MODULES


def _check_imports(facts: ModuleFacts, kernelbench: bool) -> list[Violation]:
    found = []
    for node in ast.walk(facts.tree):
        if isinstance(node, ast.Import):
            ok = _kernelbench_module_ok if kernelbench else _ALLOWED_MODULES.__contains__
            bad = [alias.name for alias in node.names if not ok(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            allowed = _ALLOWED_FROM.get(module, frozenset())
            if kernelbench and module != "os" and _kernelbench_module_ok(module):
                allowed = None
            bad = [
                f"{module}.{alias.name}"
                for alias in node.names
                if (allowed is not None and alias.name not in allowed)
                or alias.name == "*"
                or (alias.name == "functional" and not kernelbench)
            ]
        else:
            continue
        found += [_violation("forbidden_import", facts.where(node), f"imports `{name}`") for name in bad]
    return found


def _check_nodes(facts: ModuleFacts, strict: bool, kernelbench: bool, construction: frozenset[int]) -> list[Violation]:
    """Rules that look at single nodes anywhere in the file; `construction`: see `_construction_code`."""
    found = []
    ext_attrs = extension_attributes(facts)
    for node in ast.walk(facts.tree):
        where = facts.where(node)
        for rule, what in _node_findings(facts, node, strict, (ext_attrs, construction), kernelbench):
            found.append(_violation(rule, where, what))
    return found


def _check_try(facts: ModuleFacts, reached: list[ast.FunctionDef]) -> list[Violation]:
    """A try in forward or anything it calls can swap a failing kernel for another result on the timed path.

    Elsewhere (module level, __init__, helpers forward never reaches) a try cannot change what forward
    computes without forward's own code, which these rules see, so it is allowed there.
    """
    found = []
    for function in reached:
        for node in ast.walk(function):
            if isinstance(node, ast.Try | ast.TryStar):
                where = facts.where(node)
                found.append(_violation("try_except", where, f"uses a try statement in {function.name}"))
    return found


def _node_findings(
    facts: ModuleFacts,
    node: ast.AST,
    strict: bool,
    known: tuple[frozenset[str], frozenset[int]],
    kernelbench: bool,
) -> Iterator[tuple[str, str]]:
    ext_attrs, construction = known
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        yield from _definition_findings(facts, node)
    elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
        targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
        yield from _assignment_findings(facts, targets, ext_attrs)
    elif isinstance(node, ast.Call):
        yield from _call_findings(facts, node)
        yield from _module_argument_findings(facts, node, ext_attrs)
    elif isinstance(node, ast.Name) and node.id in _NAME_RULES:
        yield _NAME_RULES[node.id], f"uses `{node.id}`"
    elif isinstance(node, ast.Attribute):
        yield from _attribute_findings(facts, node, strict)
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _DUNDER.fullmatch(node.value):
        if node.value not in _SAFE_DUNDERS | {"__main__"}:
            yield "dynamic_code", f"names the special attribute `{node.value}` in a string"
    elif isinstance(node, ast.keyword) and node.arg == "weights_only":
        yield "file_or_network_access", "passes `weights_only`, which only a loader of pickled files takes"
    if isinstance(node, ast.Name | ast.Attribute) and _is_outermost(facts, node):
        yield from _reference_findings(facts, node, strict, kernelbench)
        if isinstance(node, ast.Attribute):
            yield from _chain_findings(facts, node, kernelbench, construction)


def _attribute_findings(facts: ModuleFacts, node: ast.Attribute, strict: bool) -> Iterator[tuple[str, str]]:
    if _LAZY_ATTRIBUTES.fullmatch(node.attr):
        yield "lazy_output_hooks", f"uses `.{node.attr}`"
    elif node.attr.startswith("__") and node.attr.endswith("__") and node.attr not in _SAFE_DUNDERS:
        yield "dynamic_code", f"accesses `.{node.attr}`"
    elif node.attr == "suppress":
        yield "try_except", "uses `suppress`"
    elif node.attr == "modules" and isinstance(node.value, ast.Name) and node.value.id == "sys":
        yield "dynamic_code", "uses `sys.modules`"
    elif node.attr in _MODULE_ATTRIBUTES:
        yield "dynamic_code", f"reaches the `{node.attr}` module through `{ast.unparse(node)[:60]}`"
    elif _FRAME_ATTRIBUTES.fullmatch(node.attr):
        yield "dynamic_code", f"reaches interpreter frames or code through `.{node.attr}`"
    elif strict and node.attr in ("half", "bfloat16") and not is_own_attribute(facts, node):
        yield "precision_downcast", f"converts with `.{node.attr}()`"


def _definition_findings(
    facts: ModuleFacts, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
) -> Iterator[tuple[str, str]]:
    if node.name in ("__exit__", "__aexit__"):
        yield "try_except", f"defines {node.name}, which can swallow exceptions"
    if _LAZY_ATTRIBUTES.fullmatch(node.name):
        yield "lazy_output_hooks", f"defines {node.name}"
    elif _PROTOCOL_METHODS.fullmatch(node.name):
        yield "lazy_output_hooks", f"defines {node.name}, which would run inside the judge's reading of your outputs"
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = facts.qualname(target) or (target.id if isinstance(target, ast.Name) else None)
        if name not in _DECORATORS and not policy_triton.allowed_decorator(facts, node, name):
            yield "dynamic_code", f"decorates {node.name} with `@{ast.unparse(decorator)[:60]}`"
    if isinstance(node, ast.ClassDef):
        if any(
            facts.qualname(base) in ("torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase")
            for base in node.bases
        ):
            yield "lazy_output_hooks", f"class {node.name} subclasses torch.Tensor"
        for base in node.bases:
            name = facts.qualname(base) or (base.id if isinstance(base, ast.Name) else "")
            if name in _CONTAINER_BASES or name.startswith(("collections.", "typing.")):
                yield "lazy_output_hooks", f"class {node.name} subclasses {name}: return plain lists and tuples"
        if node.name != "ModelNew" and node.keywords:
            yield "dynamic_code", f"class {node.name} sets a metaclass or class keyword"


def _assignment_findings(
    facts: ModuleFacts, targets: list[ast.expr], ext_attrs: frozenset[str]
) -> Iterator[tuple[str, str]]:
    for target in targets:
        for element in ast.walk(target):
            if not isinstance(element, ast.Attribute | ast.Subscript):
                continue
            if names_extension(facts, element.value, ext_attrs):
                yield "dynamic_code", f"replaces `{ast.unparse(element)[:60]}` of the compiled extension"
                break
            root = element
            while isinstance(root, ast.Attribute | ast.Subscript):
                root = root.value
            if isinstance(root, ast.Call) and isinstance(element, ast.Attribute):  # `type(x).tolist = ...`
                yield (
                    "global_state_change",
                    f"assigns to `{ast.unparse(element)[:60]}`, an attribute of a call's result",
                )
                break
            if isinstance(root, ast.Name) and root.id in facts.module_names and root.id != "self":
                yield (
                    "global_state_change",
                    f"assigns to `{ast.unparse(element)[:60]}`, which patches an imported module",
                )
                break
            if isinstance(root, ast.Name) and root.id == "ModelNew":
                yield "forbidden_override", f"assigns `{ast.unparse(element)[:60]}` from outside the class"
                break


def _call_findings(facts: ModuleFacts, call: ast.Call) -> Iterator[tuple[str, str]]:
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in _BUILTIN_KEYS | {"__import__", "import_module"}:
        yield "dynamic_code", f"calls `.{func.attr}` on `{ast.unparse(func.value)[:40]}`"
    if not isinstance(func, ast.Name):
        key = func.slice if isinstance(func, ast.Subscript) else None
        if isinstance(key, ast.Constant) and key.value in _BUILTIN_KEYS:  # `f_builtins["getattr"](...)`
            yield "dynamic_code", f"calls `{ast.unparse(func)[:60]}`, a builtin looked up by key"
        return
    name_arg = call.args[1] if len(call.args) >= 2 else None
    literal = isinstance(name_arg, ast.Constant) and isinstance(name_arg.value, str)
    if func.id in ("setattr", "delattr"):
        yield "dynamic_code", f"calls {func.id}; assign attributes with plain statements"
        if call.args and facts.qualname(call.args[0]) is not None:
            yield "global_state_change", f"calls {func.id} on `{ast.unparse(call.args[0])[:40]}`"
    elif func.id in ("getattr", "hasattr") and not literal:
        yield "dynamic_code", f"calls {func.id} with a computed attribute name"
    elif func.id in ("getattr", "hasattr") and str(name_arg.value).startswith("__"):  # type: ignore[union-attr]
        yield "dynamic_code", f"calls {func.id} for a special attribute"
    elif func.id == "type" and len(call.args) == 3:
        yield "dynamic_code", "creates a class with type(name, bases, namespace)"


def _chain_findings(
    facts: ModuleFacts, node: ast.Attribute, kernelbench: bool, construction: frozenset[int]
) -> Iterator[tuple[str, str]]:
    """A chain through private names, standard modules held as attributes, or a `.modules` table, whatever its root
    (bar `self`): `sys` is reachable as `torch.storage.collections._sys`, `builtins` as `torch._tensor.enum.bltns`,
    torch's global module hooks as `nn.modules.module._global_forward_hooks`, and each again through roots no alias
    tracking follows (a tuple's item, a lambda's default, a class attribute)."""
    segments = []
    current: ast.AST = node
    while isinstance(current, ast.Attribute | ast.Subscript | ast.Call):
        if isinstance(current, ast.Attribute):
            segments.append(current.attr)
        current = current.func if isinstance(current, ast.Call) else current.value
    if isinstance(current, ast.Name) and current.id in ("self", "cls"):
        return
    root = facts.aliases.get(current.id, current.id) if isinstance(current, ast.Name) else "(...)"
    segments.reverse()
    dotted = ".".join([root, *segments])
    if kernelbench and re.match(r"torch\._(?!_)", dotted):
        return  # kernelbench's own rule on torch's private internals names it
    private = [s for s in segments if s.startswith("_") and not _DUNDER.fullmatch(s)]
    if kernelbench and private == segments[-1:] and _private_helper_in_construction(facts, node, construction):
        private = []
    if private:
        yield "dynamic_code", f"reaches the private name `{private[0]}` through `{dotted[:60]}`"
    held = [s for s in segments[:-1] if s in sys.stdlib_module_names and s not in _TORCH_NAMESAKES]
    if held:
        yield "dynamic_code", f"reaches the `{held[0]}` module through `{dotted[:60]}`"
    parent = facts.parents.get(id(node))
    if segments and segments[-1] == "modules" and isinstance(parent, ast.Subscript) and parent.value is node:
        yield "dynamic_code", f"looks a module up in `{dotted[:60]}[...]`"


def _construction_code(facts: ModuleFacts, reached: list[ast.FunctionDef]) -> frozenset[int]:
    """ids of the functions that run only to build the model, as far as the text shows: every class's `__init__`
    and ModelNew's methods that forward does not reach (`reset_parameters`, as nn.Linear has)."""
    found = {
        id(node)
        for node in ast.walk(facts.tree)
        if isinstance(node, ast.FunctionDef)
        and isinstance(cls := facts.parents.get(id(node)), ast.ClassDef)
        and (node.name == "__init__" or (cls is facts.model_new and node not in reached))
    }
    return frozenset(found)


def _private_helper_in_construction(facts: ModuleFacts, node: ast.Attribute, construction: frozenset[int]) -> bool:
    """Under kernelbench: a private function of torch.nn called for its value at module level, in a class body or in
    `construction` code (`torch.nn.init._calculate_fan_in_and_fan_out(w)`, copied from nn.Linear; `_pair(3)`), as
    KernelBench solutions do: data made before anything is judged. Forward's reach stays guarded, and so do
    private names that are not the called function itself (`_sys.modules`, `_global_forward_hooks`)."""
    parent = facts.parents.get(id(node))
    if not ((facts.qualname(node) or "").startswith("torch.nn.") and isinstance(parent, ast.Call)):
        return False
    if parent.func is not node:
        return False
    while parent is not None:
        if isinstance(parent, ast.Lambda | ast.AsyncFunctionDef) or (
            isinstance(parent, ast.FunctionDef) and id(parent) not in construction
        ):
            return False
        parent = facts.parents.get(id(parent))
    return True


def _module_argument_findings(
    facts: ModuleFacts, call: ast.Call, ext_attrs: frozenset[str]
) -> Iterator[tuple[str, str]]:
    """A module handed to the compiled extension, whose C++ could then rebind its functions (`m.def`): torch passed into
    the extension as a Python object."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and names_extension(facts, func.value, ext_attrs)):
        return
    modules = set(facts.aliases.values())
    for arg in [*call.args, *(k.value for k in call.keywords)]:
        bare = isinstance(arg, ast.Name) and arg.id in facts.module_names and arg.id != "self"
        if bare or facts.qualname(arg) in modules:
            yield "dynamic_code", f"passes the module `{ast.unparse(arg)[:40]}` to the compiled extension"


def _is_outermost(facts: ModuleFacts, node: ast.AST) -> bool:
    parent = facts.parents.get(id(node))
    return not (isinstance(parent, ast.Attribute) and parent.value is node)


def _reference_findings(
    facts: ModuleFacts, node: ast.Name | ast.Attribute, strict: bool, kernelbench: bool
) -> Iterator[tuple[str, str]]:
    for dotted in facts.qualnames(node):  # a name bound to several (`T = nn`, `T = torch`) is checked as each
        for pattern, rule, what in _QUALIFIED_RULES + (_KERNELBENCH_QUALIFIED_RULES if kernelbench else []):
            if pattern.fullmatch(dotted):
                yield rule, f"uses `{dotted}`, which {what}"
        if strict and _PRECISION_NAME.fullmatch(dotted):
            yield "precision_downcast", f"uses `{dotted}`"
    qualname = facts.qualname(node)
    if qualname is None:
        return
    parent = facts.parents.get(id(node))
    is_called = isinstance(parent, ast.Call) and parent.func is node
    if (qualname in BUILDERS and not is_called) or qualname == "torch.utils.cpp_extension":
        yield "dynamic_code", f"passes `{qualname}` around instead of calling it directly"
