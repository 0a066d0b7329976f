"""Static rules for what `ModelNew.forward` may do.

`check_forward` walks `forward` and everything it calls (ModelNew's own methods and the module's
functions, transitively) and accepts only calls into the compiled extension, allocation,
shape/view helpers and a few builtins, plus arithmetic on values that are plainly Python numbers
derived from shapes (see `facts.IntRule`). It does not execute anything.

What this does not protect against: values whose type only shows at run time (a helper that
receives a tensor where the rules assume an int, a list that holds tensors). The candidate
worker's ATen dispatch tracer is the defence for those; this stage rejects the common spellings
of a torch fallback before anything is built.
"""

from __future__ import annotations

import ast
import builtins

from cuda_agent.judge.policy.facts import (
    IntRule,
    ModuleFacts,
    assigned_targets,
    extension_attributes,
    imported,
    int_attributes,
    int_names,
    is_self,
    names_extension,
    self_assignments,
    walk_code,
)
from cuda_agent.judge.policy.triton import launched_kernel
from cuda_agent.types import Violation

# Zero-filled allocation is allowed beside empty: kernels that accumulate (atomicAdd reductions, split-K) need
# a zeroed output, the memset is timed with the candidate, and zeros cannot stand in for a result.
_ALLOWED_FUNCTIONS = frozenset(
    {
        "torch.empty",
        "torch.empty_like",
        "torch.empty_strided",
        "torch.zeros",
        "torch.zeros_like",
        "torch.Size",
        "torch.no_grad",
        "torch.inference_mode",
        "torch.get_num_threads",  # read to size parallel work, as at::get_num_threads in C++: computes nothing
        "triton.cdiv",
        "triton.next_power_of_2",
    }
)
_ALLOWED_METHODS = frozenset(
    "contiguous view view_as reshape reshape_as flatten unsqueeze squeeze permute transpose t size dim ndimension "
    "numel stride is_contiguous data_ptr element_size storage_offset new_empty new_empty_strided new_zeros get_device".split()
)
_ALLOWED_BUILTINS = frozenset("len range int float bool tuple list min max isinstance enumerate zip".split())
_EXCEPTIONS = frozenset(
    n for n in dir(builtins) if isinstance(getattr(builtins, n), type) and issubclass(getattr(builtins, n), Exception)
)

ADVICE = {
    "torch_compute_in_forward": "forward may only call functions of the compiled extension, allocate with "
    "torch.empty/empty_like/empty_strided/zeros/zeros_like or x.new_empty/new_zeros, reshape with contiguous/view(_as)/reshape(_as)/flatten/"
    "(un)squeeze/permute/transpose/t, read size/stride/numel/dim/data_ptr, use len/range/int/float/tuple/list/"
    "min/max/isinstance/enumerate/zip/math.*, index with integers and slices, and call ModelNew's own methods",
    "tensor_arithmetic_in_forward": "arithmetic in forward is for Python numbers derived from shapes "
    "(x.size(0) * 4); do tensor arithmetic inside your kernel",
    "forward_calls_no_kernel": "call a function of the compiled extension from forward (an object bound to "
    "load_inline(...)/load(...), or the cuda_extension module of a workspace), or launch a @triton.jit kernel "
    "as kernel[grid](...)",
}


def check_forward(facts: ModuleFacts, device: str) -> tuple[list[Violation], list[ast.FunctionDef]]:
    """Apply the forward rules to ModelNew.forward and everything it calls.

    Returns:
        Violations named torch_compute_in_forward, tensor_arithmetic_in_forward and
        forward_calls_no_kernel (the last when no call reaches the compiled extension), and the
        functions forward reaches (itself included), for rules about the timed path.
    """
    assert facts.model_new is not None
    checker = _ForwardChecker(facts, facts.model_new, device)
    return checker.run(), checker.reached


class _ForwardChecker:
    """Walks forward's call graph; one instance per check."""

    def __init__(self, facts: ModuleFacts, cls: ast.ClassDef, device: str) -> None:
        self.facts, self.cls, self.device = facts, cls, device
        self.methods = _methods(cls)
        self.ext_attrs = extension_attributes(facts)
        self.int_attrs = int_attributes(facts, self.methods)
        self.found: list[Violation] = []
        self.kernel_calls = 0
        self.launches: set[int] = set()
        """id of each `kernel[grid]` that a checked call launches: a grid, not an index that makes torch gather."""
        self.seen: set[int] = set()
        self.reached: list[ast.FunctionDef] = []
        """Functions forward reaches, in the order first checked."""
        self.int_params: dict[int, set[str]] = {}
        """id(function) -> parameters that every call site seen so far passes a Python number."""
        self.referenced: set[int] = {id(self.methods["forward"])} if "forward" in self.methods else set()
        """id(function) of those reached other than by a seen call (forward; `fn = self.helper`): their parameters
        may receive anything, so a default that is a number stays their only evidence."""
        self.shadowed: frozenset[str] = frozenset()
        """Names the function being checked binds itself."""

    def run(self) -> list[Violation]:
        forward = self.methods.get("forward")
        if forward is None:
            return [self._violation("forward_calls_no_kernel", self.cls, "ModelNew defines no forward method")]
        queue = [forward]
        while queue:
            function = queue.pop()
            if id(function) not in self.seen:
                self.seen.add(id(function))
                self.reached += [function] if function not in self.reached else []
                queue += self._check_function(function)
        if self.kernel_calls == 0:
            self.found.append(
                self._violation(
                    "forward_calls_no_kernel",
                    forward,
                    f"forward never calls the compiled extension nor launches a Triton kernel, so none of your kernels runs on {self.device}",
                )
            )
        return self.found

    def _violation(self, rule: str, node: ast.AST, what: str) -> Violation:
        return Violation(check=rule, message=f"{self.facts.where(node)}: {what}; {ADVICE[rule]}.")

    def _check_function(self, function: ast.FunctionDef) -> list[ast.FunctionDef]:
        """Check one function's body; return the functions it reaches."""
        seed = self.int_params.get(id(function), set())
        trust_defaults = id(function) in self.referenced
        names = int_names(function, self.facts, self.int_attrs, seed=seed, trust_defaults=trust_defaults)
        intish = IntRule(self.facts, names, self.int_attrs)
        self.shadowed = _local_names(function)
        reached, called = [], set()
        for node in walk_code(function):  # parents come before children, so a call's func is known when seen
            if isinstance(node, ast.Call):
                called.add(id(node.func))
                reached += self._check_call(node, intish)
            elif isinstance(node, ast.Attribute) and is_self(node.value) and node.attr in self.methods:
                if id(node) not in called:  # a bare reference, e.g. fn = self.helper
                    reached += self._follow(self.methods[node.attr], None, intish)
            elif isinstance(node, ast.Subscript) and id(node) not in self.launches:
                self._check_subscript(node, intish)
            elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load) and not is_self(node.value):
                what = f"assigns `{ast.unparse(node)[:60]}`, which changes a tensor or object in place"
                self.found.append(self._violation("torch_compute_in_forward", node, what))
            elif isinstance(node, ast.BinOp | ast.AugAssign | ast.UnaryOp | ast.Compare):
                self._check_operator(node, intish)
        return reached

    def _follow(self, function: ast.FunctionDef, call: ast.Call | None, intish: IntRule) -> list[ast.FunctionDef]:
        """Queue a called function, remembering which parameters receive Python numbers at this site."""
        params = [a.arg for a in [*function.args.posonlyargs, *function.args.args]]
        is_static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in function.decorator_list)
        if function.name in self.methods and self.methods[function.name] is function and not is_static:
            params = params[1:]
        # a bare reference (fn = self.helper) may be called with anything
        numbers = set() if call is None else _call_numbers(params, function, call, intish)
        if call is None and id(function) not in self.referenced:
            self.referenced.add(id(function))
            self.seen.discard(id(function))
        old = self.int_params.get(id(function))
        new = numbers if old is None else old & numbers
        if old is not None and new != old:
            self.seen.discard(id(function))  # a new call site passes a tensor where others passed numbers
        self.int_params[id(function)] = new
        return [function]

    def _check_call(self, call: ast.Call, intish: IntRule) -> list[ast.FunctionDef]:
        func, facts = call.func, self.facts
        qualname = facts.qualname(func)
        if launched_kernel(facts, call, self.shadowed) is not None:
            self.kernel_calls += 1
            self.launches.add(id(func))
        elif isinstance(func, ast.Name) and func.id in facts.triton_kernels and func.id not in self.shadowed:
            self._bad_call(call, f"calls the kernel `{func.id}` without a launch grid (`{func.id}[grid](...)`)")
        elif names_extension(facts, func, shadowed=self.shadowed) or (
            isinstance(func, ast.Attribute) and names_extension(facts, func.value, self.ext_attrs, self.shadowed)
        ):
            self.kernel_calls += 1
        elif qualname is not None:
            if qualname not in _ALLOWED_FUNCTIONS and not qualname.startswith("math."):
                self._bad_call(call, f"calls `{qualname}`, so torch (not your kernel) does this work")
        elif (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in ("self", "ModelNew")
        ):
            if func.attr in self.methods:
                return self._follow(self.methods[func.attr], call, intish)
            self._bad_call(call, f"calls `{ast.unparse(func)}`, a submodule, parameter or nn.Module method")
        elif isinstance(func, ast.Attribute):
            if func.attr not in _ALLOWED_METHODS:
                self._bad_call(call, f"calls the method `.{func.attr}()`")
        elif isinstance(func, ast.Name) and func.id in facts.functions and func.id not in self.shadowed:
            return self._follow(facts.functions[func.id], call, intish)
        elif not (isinstance(func, ast.Name) and (func.id in _ALLOWED_BUILTINS or func.id in _EXCEPTIONS)):
            self._bad_call(call, f"calls `{ast.unparse(func)[:60]}`")
        return []

    def _bad_call(self, call: ast.Call, what: str) -> None:
        self.found.append(self._violation("torch_compute_in_forward", call, what))

    def _check_subscript(self, node: ast.Subscript, intish: IntRule) -> None:
        if not isinstance(node.ctx, ast.Load):
            self.found.append(
                self._violation(
                    "torch_compute_in_forward",
                    node,
                    f"writes `{ast.unparse(node)[:60]}` by indexing, which runs a torch copy or fill",
                )
            )
        elif not intish.check(node.slice):
            self.found.append(
                self._violation(
                    "torch_compute_in_forward",
                    node,
                    f"indexes with `{ast.unparse(node.slice)[:60]}`, which makes torch gather",
                )
            )

    def _check_operator(self, node: ast.AST, intish: IntRule) -> None:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            what = "uses the matrix product operator @"
        elif isinstance(node, ast.BinOp) and not (intish.check(node.left) and intish.check(node.right)):
            what = f"computes `{ast.unparse(node)[:60]}` on values that may be tensors"
        elif isinstance(node, ast.AugAssign) and not (intish.check(node.target) and intish.check(node.value)):
            what = f"updates `{ast.unparse(node.target)[:60]}` in place with an operator on values that may be tensors"
        elif isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.Not) and not intish.check(node.operand):
            what = f"computes `{ast.unparse(node)[:60]}` on a value that may be a tensor"
        elif isinstance(node, ast.Compare) and not all(isinstance(op, ast.Is | ast.IsNot) for op in node.ops):
            if all(intish.check(part) for part in [node.left, *node.comparators]):
                return
            what = f"compares `{ast.unparse(node)[:60]}` on values that may be tensors"
        else:
            return
        self.found.append(self._violation("tensor_arithmetic_in_forward", node, what))


def _call_numbers(params: list[str], function: ast.FunctionDef, call: ast.Call, intish: IntRule) -> set[str]:
    """Parameters (and `*args`) of `function` that this call fills with Python numbers only.

    From the first `*iterable` argument on, which parameter gets which item is known only at run time
    (`f(*x.shape[:0], x)` hands x to the first parameter; a short iterable leaves a later one to its keyword
    or default), so those parameters hold numbers only if everything that may land in them does.
    """
    values = dict(zip(reversed(params), reversed(function.args.defaults), strict=False))
    values.update({k.arg: k.value for k in call.keywords if k.arg})
    args = call.args
    starred = next((i for i, arg in enumerate(args) if isinstance(arg, ast.Starred)), None)
    known = len(args) if starred is None else starred
    values.update(zip(params[:known], args, strict=False))
    numbers = {p for p in params[:known] if p in values and intish.check(values[p])}
    rest = args[min(known, len(params)) :]
    rest_is_numbers = all(intish.check(arg) for arg in rest)
    for p in params[known:]:
        if (starred is None or rest_is_numbers) and p in values and intish.check(values[p]):
            numbers.add(p)
        elif starred is not None and rest_is_numbers and p not in values:
            numbers.add(p)
    if function.args.vararg is not None and rest_is_numbers:
        numbers.add(function.args.vararg.arg)
    keyword_only = function.args.kwonlyargs
    values = dict(zip((a.arg for a in keyword_only), function.args.kw_defaults, strict=True))
    values.update({k.arg: k.value for k in call.keywords if k.arg in values})
    numbers |= {name for name, value in values.items() if value is not None and intish.check(value)}
    return numbers


def _methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef]:
    """ModelNew's methods, leaving out names also bound as class attributes or self.X (those win at run time)."""
    methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
    rebound = {t.id for stmt in cls.body for t, _ in assigned_targets(stmt) if isinstance(t, ast.Name)}
    rebound |= {attr for method in methods.values() for attr, _ in self_assignments(method)}
    return {name: method for name, method in methods.items() if name not in rebound}


def _local_names(function: ast.FunctionDef) -> frozenset[str]:
    """Names a function binds itself (parameters, assignments, imports), which hide module-level names."""
    declared_global = {n for node in ast.walk(function) if isinstance(node, ast.Global) for n in node.names}
    names = {a.arg for a in ast.walk(function.args) if isinstance(a, ast.arg)} - {"self"}
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {local for local, _ in imported(node)}
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node is not function:
            names.add(node.name)
    return frozenset(names - declared_global)
