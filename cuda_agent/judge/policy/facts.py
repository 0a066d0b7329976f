"""What the static policy knows about a parsed solution: imports, bindings, the compiled extension, numbers.

`collect_facts` reads a parsed module once: import aliases, every binding of every module-level
name, the module's functions, the names that hold the compiled extension (a `load_inline`/`load`
result or the workspace's `cuda_extension` module), and `class ModelNew`. `IntRule` and
`int_names` decide which expressions are plainly Python numbers (shapes, sizes, constants), so
the forward rules can tell shape arithmetic from tensor arithmetic.

What this does not protect against: it reasons about names, not run-time values. A name is
trusted to hold the extension only if every binding of it, anywhere at module level, is the
extension; a value that only becomes a tensor at run time (a constructor argument that is a
tensor) is taken for a number. The candidate worker's ATen tracer covers what is missed here.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

EXTENSION_MODULES = frozenset({"cuda_extension"})
"""Modules a workspace solution imports to reach its compiled kernels (the fixed binding)."""
BUILDERS = frozenset({"torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load"})

_META_ATTRIBUTES = frozenset("shape ndim dtype device is_cuda layout requires_grad".split())
_INT_RESULT_METHODS = frozenset(
    "size dim ndimension numel stride is_contiguous data_ptr element_size storage_offset get_device".split()
)
_INT_RESULT_BUILTINS = frozenset("len int float bool isinstance round".split())
_ITEM_BUILTINS = frozenset("min max abs sum tuple list range enumerate zip reversed sorted".split())
"""Builtins whose result holds numbers when every argument does (the items of a shape, counted or paired)."""
_DTYPES = frozenset("float32 float float64 double int8 int16 int32 int int64 long uint8 bool".split())


Binding = ast.AST | str | None
"""What a module-level name was bound to: the assigned expression, the def or class statement, the
dotted name of an import, or None when it cannot be known (augmented assignment, global, loop)."""


@dataclass
class ModuleFacts:
    """What every Python rule needs to know about one parsed solution."""

    tree: ast.Module
    name: str
    """File name used in messages."""
    aliases: dict[str, str] = field(default_factory=dict)
    """Local name -> dotted name it was imported as ('nn' -> 'torch.nn')."""
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    """Module-level functions by name (only names bound by nothing but their def)."""
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    """Module-level name -> everything ever bound to it, in any block at module level."""
    ext_names: set[str] = field(default_factory=set)
    """Module-level names bound only to a compiled extension (or a function imported from one)."""
    model_new: ast.ClassDef | None = None
    int_globals: set[str] = field(default_factory=set)
    """Module-level names that only ever hold Python numbers (BLOCK = 256)."""
    parents: dict[int, ast.AST] = field(default_factory=dict)
    """id(node) -> its parent node."""
    bound_aliases: dict[str, set[str]] = field(default_factory=dict)
    """Names bound by assignment to import-rooted chains, with every dotted name each may hold ('T' in
    `T = torch`, 'M' in `M = torch.cuda.memory`): the qualified-name rules check each
    (else `T = torch; T.load(...)` would pass)."""
    passed_aliases: set[str] = field(default_factory=set)
    """Parameters of local functions that a call passes such a chain (`def f(T)` and `f(torch)`)."""
    triton_kernels: frozenset[str] = frozenset()
    """Module-level functions decorated with `@triton.jit` (policy/triton.py): launched as `kernel[grid](...)`."""
    module_names: set[str] = field(default_factory=set)
    """Names that may hold an imported module or something in one: the import aliases, any name bound anywhere
    to a plain chain from one (`T = torch`, `F = torch.nn.functional`, `m = T.sys.modules["x"]`, `getattr(T, "y")`),
    and a local function's parameters given one as an argument. Attribute stores on them patch a module."""

    def where(self, node: ast.AST) -> str:
        return f"{self.name}:{getattr(node, 'lineno', '?')}"

    def qualname(self, node: ast.AST) -> str | None:
        """Dotted name of an import-rooted Name/Attribute chain ('F.relu' -> 'torch.nn.functional.relu'); None where
        there is none, or several (`qualnames`)."""
        names = self.qualnames(node)
        return names[0] if len(names) == 1 else None

    def qualnames(self, node: ast.AST) -> list[str]:
        """Every dotted name a chain may stand for: one for an import alias, each one a bound name was given."""
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return [self.aliases[node.id]]
            bound = self.bound_aliases.get(node.id)
            return sorted(bound) if bound and not self._shadowed(node) else []
        if isinstance(node, ast.Attribute):
            return [f"{base}.{node.attr}" for base in self.qualnames(node.value)]
        return []

    def _shadowed(self, node: ast.Name) -> bool:
        """Whether `node` names a parameter of a function around it (`def forward(self, x)` beside a module-level
        `x = torch.float32`), unless a call of that function passes the parameter a chain (`f(torch)`)."""
        parent = self.parents.get(id(node))
        while parent is not None:
            if isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                a = parent.args
                params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]
                if node.id in {p.arg for p in params}:
                    return node.id not in self.passed_aliases
            parent = self.parents.get(id(parent))
        return False

    def is_builder_call(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and self.qualname(node.func) in BUILDERS


def collect_facts(tree: ast.Module, name: str) -> ModuleFacts:
    """Gather imports, functions, bindings, extension names and ModelNew from a parsed module."""
    facts = ModuleFacts(tree=tree, name=name)
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            facts.parents[id(child)] = node
        if isinstance(node, ast.Import | ast.ImportFrom):
            for local, dotted in imported(node):
                facts.aliases[local] = dotted
    facts.bindings = _module_bindings(tree)
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef) and stmt.name == "ModelNew":
            facts.model_new = stmt
    facts.functions = {
        n: values[0]
        for n, values in facts.bindings.items()
        if len(values) == 1 and isinstance(values[0], ast.FunctionDef)
    }
    candidates = {n for n, values in facts.bindings.items() if all(isinstance(v, str | ast.expr) for v in values)}
    while True:  # shrink to the names whose every binding is an extension (ext2 = ext chains)
        kept = {n for n in candidates if all(_is_extension_value(facts, v, candidates) for v in facts.bindings[n])}
        if kept == candidates:
            break
        candidates = kept
    facts.ext_names = candidates
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    pairs = [pair for node in ast.walk(tree) for pair in _bound_pairs(node, functions)]
    facts.module_names = _module_names(facts, pairs)
    _bind_aliases(facts, pairs)
    facts.int_globals = _fixpoint_int_names(facts.bindings, set(), facts, frozenset())
    facts.triton_kernels = frozenset(
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and node.name in facts.functions
        and any(facts.qualname(d.func if isinstance(d, ast.Call) else d) == "triton.jit" for d in node.decorator_list)
    )
    return facts


def _module_names(facts: ModuleFacts, pairs: list[tuple[ast.AST, ast.AST | None]]) -> set[str]:
    """`ModuleFacts.module_names`, to a fixpoint (`T = torch` then `T.softmax = ...` patches torch.softmax)."""
    names = set(facts.aliases)
    while True:
        found = set()
        for target, value in pairs:
            if _module_chain(value, names):
                found |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        if found <= names:
            return names
        names |= found


def _bind_aliases(facts: ModuleFacts, pairs: list[tuple[ast.AST, ast.AST | None]]) -> None:
    """`ModuleFacts.bound_aliases`, to a fixpoint (`F = torch.nn` then `G = F.functional`)."""
    for _ in range(8):  # what a name may hold only grows; `T = T.x` would grow forever, so the rounds are bounded
        before = {name: len(dotted) for name, dotted in facts.bound_aliases.items()}
        for target, value in pairs:
            if not isinstance(target, ast.Name) or target.id in facts.aliases or value is None:
                continue
            dotted = facts.qualnames(value)
            if dotted:
                facts.bound_aliases.setdefault(target.id, set()).update(dotted)
                if id(target) not in facts.parents:  # a parameter bound by a call (`_bound_pairs` made the node)
                    facts.passed_aliases.add(target.id)
        if before == {name: len(dotted) for name, dotted in facts.bound_aliases.items()}:
            return


def _bound_pairs(node: ast.AST, functions: dict[str, ast.AST]) -> list[tuple[ast.AST, ast.AST | None]]:
    """(target, value) pairs a node binds: assignments, loops, with-items, and a called local function's parameters."""
    if isinstance(node, ast.Assign):
        return [pair for target in node.targets for pair in _pairs(target, node.value)]
    if isinstance(node, ast.AnnAssign | ast.NamedExpr) and node.value is not None:
        return list(_pairs(node.target, node.value))
    if isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
        return [(node.target, node.iter)]
    if isinstance(node, ast.withitem) and node.optional_vars is not None:
        return [(node.optional_vars, node.context_expr)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions:
        params = functions[node.func.id].args
        positional = [*params.posonlyargs, *params.args]
        pairs = [(ast.Name(id=p.arg), arg) for p, arg in zip(positional, node.args, strict=False)]
        by_name = {p.arg: p for p in [*positional, *params.kwonlyargs]}
        pairs += [(ast.Name(id=k.arg), k.value) for k in node.keywords if k.arg in by_name]
        return pairs
    return []


def _module_chain(value: ast.AST | None, names: set[str]) -> bool:
    """Whether `value` is (a tuple of, or getattr on) a plain name/attribute/subscript chain from one of `names`."""
    if isinstance(value, ast.Tuple | ast.List):
        return any(_module_chain(v, names) for v in value.elts)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "getattr" and value.args:
        return _module_chain(value.args[0], names)
    while isinstance(value, ast.Attribute | ast.Subscript):
        value = value.value
    return isinstance(value, ast.Name) and value.id in names


def imported(node: ast.Import | ast.ImportFrom) -> list[tuple[str, str]]:
    """(local name, dotted name) pairs an import binds; relative imports bind nothing we can name."""
    if isinstance(node, ast.Import):
        return [(a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0]) for a in node.names]
    if node.module is None or node.level:
        return []
    return [(a.asname or a.name, f"{node.module}.{a.name}") for a in node.names]


def _module_bindings(tree: ast.Module) -> dict[str, list[Binding]]:
    """Every binding of every module-level name, from statements at any depth outside functions and classes."""
    bindings: dict[str, list[Binding]] = defaultdict(list)
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bindings[node.name].append(node)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for local, dotted in imported(node):
                bindings[local].append(dotted)
        elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for single, value in _pairs(target, node.value):
                    if isinstance(single, ast.Name):
                        bindings[single.id].append(value)
                    else:
                        stack.append(single)
            stack.append(node.value)
        elif not isinstance(node, ast.Lambda | ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                bindings[node.id].append(None)
            stack.extend(ast.iter_child_nodes(node))
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):  # a function may rebind these at run time
            for global_name in node.names:
                bindings[global_name].append(None)
    return bindings


def _is_extension_value(facts: ModuleFacts, value: Binding, names: set[str]) -> bool:
    if isinstance(value, str):
        return value.split(".")[0] in EXTENSION_MODULES
    if isinstance(value, ast.Name):
        return value.id in names
    return facts.is_builder_call(value)


def assigned_targets(stmt: ast.stmt) -> list[tuple[ast.expr, ast.expr]]:
    """(target, value) pairs a statement assigns (augmented assignments give their right-hand side)."""
    if isinstance(stmt, ast.Assign):
        return [(target, stmt.value) for target in stmt.targets]
    if isinstance(stmt, ast.AnnAssign | ast.AugAssign) and stmt.value is not None:
        return [(stmt.target, stmt.value)]
    return []


def names_extension(
    facts: ModuleFacts, node: ast.AST, ext_attrs: frozenset[str] = frozenset(), shadowed: frozenset[str] = frozenset()
) -> bool:
    """`node` is the compiled extension: a module name bound only to it, or self.X / ModelNew.X holding it.

    `shadowed` are names the enclosing function binds itself, which hide module-level names.
    """
    if isinstance(node, ast.Name):
        return node.id in facts.ext_names and node.id not in shadowed
    return isinstance(node, ast.Attribute) and is_self(node.value) and node.attr in ext_attrs


def walk_code(function: ast.FunctionDef) -> Iterator[ast.AST]:
    """Every node of the function body except type annotations, which are not executed as code."""
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        yield node
        for name, value in ast.iter_fields(node):
            if name in ("annotation", "returns", "decorator_list"):
                continue
            children = value if isinstance(value, list) else [value]
            stack += [child for child in children if isinstance(child, ast.AST)]


def is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "ModelNew")


def self_assignments(function: ast.FunctionDef) -> Iterator[tuple[str, ast.expr | None]]:
    """(attribute, value) for every `self.X = value` in a method, tuple assignments included."""
    for node in ast.walk(function):
        if isinstance(node, ast.stmt):
            for target, value in assigned_targets(node):
                for single, bound in _pairs(target, value):
                    if isinstance(single, ast.Attribute) and is_self(single.value):
                        yield single.attr, bound


def is_own_attribute(facts: ModuleFacts, node: ast.Attribute) -> bool:
    """`node` is `self.X` (or `Cls.X`) inside a class of the solution that binds X itself, unconditionally, in its
    body or at the top of `__init__` (`self.half = n // 2`): the solution's own value, whatever it shadows of
    nn.Module's (`.half()`), and checked where it is bound. Never when called: an own number is not called, and a
    binding that may not run (`if False: self.half = 0`) is not counted, so nn.Module's method stays seen."""
    value = node.value
    parent = facts.parents.get(id(node))
    if not isinstance(value, ast.Name) or (isinstance(parent, ast.Call) and parent.func is node):
        return False
    while parent is not None and not isinstance(parent, ast.ClassDef):
        parent = facts.parents.get(id(parent))
    if parent is None or value.id not in ("self", parent.name):
        return False
    statements = list(parent.body)
    for method in parent.body:
        if isinstance(method, ast.FunctionDef) and method.name == "__init__":
            statements += method.body
    for stmt in statements:
        for target, _ in assigned_targets(stmt):
            for single, _ in _pairs(target, None):
                if isinstance(single, ast.Name) and stmt in parent.body and single.id == node.attr:
                    return True
                if isinstance(single, ast.Attribute) and is_self(single.value) and single.attr == node.attr:
                    return True
    return False


def extension_attributes(facts: ModuleFacts) -> frozenset[str]:
    """Attributes of ModelNew (class-level or self.X) that only ever hold the compiled extension."""
    cls = facts.model_new
    if cls is None:
        return frozenset()
    values: dict[str, list[ast.expr | None]] = defaultdict(list)
    for stmt in cls.body:
        for target, value in assigned_targets(stmt):
            for single, bound in _pairs(target, value):
                if isinstance(single, ast.Name):
                    values[single.id].append(bound)
        if isinstance(stmt, ast.FunctionDef):
            for attr, bound in self_assignments(stmt):
                values[attr].append(bound)
    found = frozenset(values)
    while True:  # shrink until every value is the extension (self.b = self.a chains)
        kept = frozenset(
            n
            for n in found
            if all(v is not None and (facts.is_builder_call(v) or names_extension(facts, v, found)) for v in values[n])
        )
        if kept == found:
            return found
        found = kept


def int_attributes(facts: ModuleFacts, methods: dict[str, ast.FunctionDef]) -> frozenset[str]:
    """self.X attributes assigned only Python numbers (constructor arguments count as numbers), to a fixpoint:
    `self.half = n // 2` makes `self.quarter = self.half // 2` a number too."""
    found = frozenset(attr for method in methods.values() for attr, _ in self_assignments(method))
    while True:
        values: dict[str, list[bool]] = defaultdict(list)
        for method in methods.values():
            seed = {a.arg for a in method.args.args[1:]} if method.name == "__init__" else set()
            rule = IntRule(facts, int_names(method, facts, found, seed), found)
            for attr, value in self_assignments(method):
                values[attr].append(rule.check(value))
        kept = frozenset(attr for attr, numbers in values.items() if all(numbers))
        if kept == found:
            return found
        found = kept


def int_names(
    function: ast.FunctionDef,
    facts: ModuleFacts,
    int_attrs: frozenset[str],
    seed: set[str] | None = None,
    trust_defaults: bool = True,
) -> set[str]:
    """Names that only ever hold Python numbers (or shapes) inside `function`.

    `seed` names are numbers by assumption (constructor arguments, call sites that pass numbers);
    so are parameters declared as numbers, and module-level numbers the function does not rebind.
    A default says what a parameter holds only where no call passes it: with `trust_defaults` off (every call
    site is known and `seed` says what each passes, defaults included), a number as default counts for nothing.
    """
    seed = (seed or set()) | _numeric_params(function, trust_defaults)
    assigned = _local_bindings(function)
    args = function.args
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, (args.vararg, args.kwarg))]:
        if arg.arg not in seed:
            assigned[arg.arg].append(None)
    seed |= {name for name in facts.int_globals if name not in assigned}
    return _fixpoint_int_names(assigned, seed, facts, int_attrs)


def _local_bindings(function: ast.FunctionDef) -> dict[str, list[ast.expr | None]]:
    """Every value a function binds to each local name; None where it cannot be known."""
    assigned: dict[str, list[ast.expr | None]] = defaultdict(list)
    for node in ast.walk(function):
        pairs: list[tuple[ast.expr, ast.expr | None]] = []
        if isinstance(node, ast.stmt):
            pairs = [p for target, value in assigned_targets(node) for p in _pairs(target, value)]
        if isinstance(node, ast.For | ast.comprehension):
            # A loop variable holds an item of what it iterates: numbers when that is a shape, a range or a
            # tuple of numbers (`for d in x.shape`), so the iterable itself stands for the item.
            pairs += list(_pairs(node.target, node.iter))
        elif isinstance(node, ast.NamedExpr):
            pairs.append((node.target, node.value))
        elif isinstance(node, ast.With):
            pairs += [(t, None) for item in node.items if item.optional_vars for t in ast.walk(item.optional_vars)]
        for target, value in pairs:
            if isinstance(target, ast.Name):
                assigned[target.id].append(value)
    return assigned


def _numeric_params(function: ast.FunctionDef, trust_defaults: bool = True) -> set[str]:
    """Parameters declared as numbers: annotated int/float/bool, or (`trust_defaults`) defaulting to a number."""
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    defaults = dict(zip(reversed(positional), reversed(args.defaults), strict=False))
    defaults.update({a: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None})
    numeric = set()
    for arg in [*positional, *args.kwonlyargs, *filter(None, (args.vararg,))]:
        annotation, default = arg.annotation, defaults.get(arg)
        if isinstance(annotation, ast.Name) and annotation.id in ("int", "float", "bool"):
            numeric.add(arg.arg)
        elif trust_defaults and isinstance(default, ast.Constant) and isinstance(default.value, int | float):
            numeric.add(arg.arg)
    return numeric


def _pairs(target: ast.expr, value: ast.expr | None) -> Iterator[tuple[ast.expr, ast.expr | None]]:
    """(single target, value) pairs of an assignment; `a, b = x.shape` gives each name all of x.shape."""
    if isinstance(target, ast.Tuple | ast.List):
        same_shape = isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(target.elts)
        for i, element in enumerate(target.elts):
            yield from _pairs(element, value.elts[i] if same_shape else value)  # type: ignore[union-attr]
    elif isinstance(target, ast.Starred):
        yield from _pairs(target.value, value)
    else:
        yield target, value


def _fixpoint_int_names(assigned: dict, seed: set[str], facts: ModuleFacts, int_attrs: frozenset[str]) -> set[str]:
    names = set(seed) | {n for n, values in assigned.items() if None not in values}
    changed = True
    while changed:
        rule = IntRule(facts, names, int_attrs)
        keep = {n for n in names if n in seed or all(rule.check(v) for v in assigned.get(n, []))}
        changed, names = keep != names, keep
    return names


def _number_parts(node: ast.AST) -> list[ast.AST | None] | None:
    """The parts that must all be numbers for `node` to be one (an operator's operands, a container's items, a
    comprehension's item and what it iterates); None for a node that is not built of parts this way."""
    if isinstance(node, ast.Subscript):
        return [node.value, node.slice]
    if isinstance(node, ast.Slice):
        return [node.lower, node.upper, node.step]
    if isinstance(node, ast.Tuple | ast.List):
        return list(node.elts)
    if isinstance(node, ast.BinOp):
        # `@` is for tensors alone: a part that is never a number stands for it
        return [node.left, node.right] if not isinstance(node.op, ast.MatMult) else [ast.Pass()]
    if isinstance(node, ast.UnaryOp):
        return [node.operand]
    if isinstance(node, ast.BoolOp):
        return list(node.values)
    if isinstance(node, ast.Compare):
        return [node.left, *node.comparators]
    if isinstance(node, ast.IfExp):
        return [node.body, node.orelse]
    if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp):
        return [node.elt, *(g.iter for g in node.generators)]
    if isinstance(node, ast.Starred):  # `*x.shape` among a call's arguments or a tuple's items: its items
        return [node.value]
    return None


@dataclass(frozen=True)
class IntRule:
    """Decides whether an expression is plainly a Python number, shape, dtype or string."""

    facts: ModuleFacts
    names: set[str]
    int_attrs: frozenset[str]
    depth: int = 0
    """How many module functions deep this rule looks through return values."""

    def check(self, node: ast.AST | None) -> bool:
        if node is None or isinstance(node, ast.Constant | ast.JoinedStr):
            return True
        if isinstance(node, ast.Name):
            return node.id in self.names
        if isinstance(node, ast.Attribute):
            qualname = self.facts.qualname(node)
            if qualname is not None:
                return qualname.startswith("math.") or qualname.removeprefix("torch.") in _DTYPES
            return node.attr in _META_ATTRIBUTES or (is_self(node.value) and node.attr in self.int_attrs)
        parts = _number_parts(node)
        if parts is not None:
            return all(self.check(part) for part in parts)
        if isinstance(node, ast.Call):
            return self._check_call(node)
        return False

    def _check_call(self, node: ast.Call) -> bool:
        func = node.func
        qualname = self.facts.qualname(func)
        if qualname is not None:
            return qualname.startswith("math.") or qualname in ("torch.Size", "triton.cdiv", "triton.next_power_of_2")
        if isinstance(func, ast.Attribute):
            return func.attr in _INT_RESULT_METHODS
        if isinstance(func, ast.Name) and func.id in _INT_RESULT_BUILTINS:
            return True
        if isinstance(func, ast.Name) and func.id in self.facts.functions and self.depth < 3:
            return self._returns_number(self.facts.functions[func.id], node)
        if isinstance(func, ast.Name) and func.id in _ITEM_BUILTINS:
            return all(self.check(a.value if isinstance(a, ast.Starred) else a) for a in node.args)
        return False

    def _returns_number(self, function: ast.FunctionDef, call: ast.Call) -> bool:
        """A module function given numbers returns a number (e.g. a ceil-div helper)."""
        if not all(self.check(arg) for arg in [*call.args, *(k.value for k in call.keywords)]):
            return False
        args = function.args
        params = {a.arg for a in [*args.posonlyargs, *args.args, *filter(None, (args.vararg,))]}
        inner = IntRule(
            self.facts, int_names(function, self.facts, self.int_attrs, seed=params), self.int_attrs, self.depth + 1
        )
        returns = [node.value for node in walk_code(function) if isinstance(node, ast.Return)]
        return bool(returns) and all(inner.check(value) for value in returns)
