"""Decontamination against KernelBench and duplicate detection, all on source structure (nothing runs).

Structural similarity (the paper's 0.9 rule). The `Model` class is parsed and flattened into the
pre-order sequence of its AST node types, with
- identifiers abstracted: variable, argument and `self.` attribute names become `Name` / `arg` / `self.*`;
- constants abstracted: every literal becomes `Const`;
- docstrings dropped;
- operator names kept: `torch.relu`, `nn.Conv2d`, `x.sum` keep their attribute (`Attr:relu`), because
  which operator is called is the structure that matters.
Two classes' similarity is `difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()` of these
sequences (2 x matching tokens / total tokens, in [0, 1]). `quick_ratio` bounds it from above, so
most of the 250 comparisons per problem stop there.

Operator signature: the set of operators a `Model` calls (`nn.ReLU`, `F.relu`, `torch.relu` and
`x.relu()` all count as `relu`; `self.conv(x)` counts as the module assigned to `self.conv`; `+ - * /`
as add/sub/mul/div). A problem with the same signature as a KernelBench problem is reported, since the
0.9 rule misses renamed or reordered copies.

Duplicates within a data set: exact = the same module AST (formatting and comments ignored); near = the
same module token sequence with identifiers abstracted but constants kept (the same program up to
names and formatting).
"""

from __future__ import annotations

import ast
import difflib
import hashlib

from pydantic import BaseModel

_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.MatMult: "matmul", ast.Pow: "pow"}


def _parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except SyntaxError:
        return None


def _model_class(tree: ast.Module) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)


def _is_docstring(node: ast.AST) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _tokens(node: ast.AST, keep_constants: bool, out: list[str]) -> None:
    if _is_docstring(node):
        return
    if isinstance(node, ast.Attribute):
        is_self = isinstance(node.value, ast.Name) and node.value.id == "self"
        out.append("self.*" if is_self else f"Attr:{node.attr}")
        if is_self:
            return
    elif isinstance(node, ast.Constant):
        out.append(f"Const:{node.value!r}" if keep_constants else "Const")
    else:
        out.append(type(node).__name__)
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, ast.expr_context):
            _tokens(child, keep_constants, out)


def structure_tokens(code: str) -> list[str]:
    """The normalised token sequence of the `Model` class (the whole module if there is none)."""
    tree = _parse(code)
    if tree is None:
        return []
    out: list[str] = []
    _tokens(_model_class(tree) or tree, False, out)
    return out


def similarity(a: list[str], b: list[str]) -> float:
    """difflib ratio of two token sequences, in [0, 1]."""
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


class Nearest(BaseModel):
    """The most similar reference problem."""

    similarity: float
    ref: str | None


class StructureIndex:
    """Token sequences of reference problems (KernelBench), searched for the most similar one."""

    def __init__(self, refs_and_codes: list[tuple[str, str]]) -> None:
        # One matcher per reference with the reference as its second sequence: difflib caches its analysis
        # of that sequence (b2j, fullbcount), so each query only pays for its own side.
        self.entries: list[tuple[str, difflib.SequenceMatcher]] = []
        for ref, code in refs_and_codes:
            matcher = difflib.SequenceMatcher(None, autojunk=False)
            matcher.set_seq2(structure_tokens(code))
            self.entries.append((ref, matcher))

    def nearest(self, code: str, at_least: float = 0.0) -> Nearest:
        """The reference with the highest similarity; those that cannot beat `at_least` or the best so far are
        skipped via difflib's cheap upper bounds, so the result is exact when it is >= at_least."""
        tokens = structure_tokens(code)
        best = Nearest(similarity=0.0, ref=None)
        for ref, matcher in self.entries:
            matcher.set_seq1(tokens)
            floor = max(best.similarity, at_least)
            if matcher.real_quick_ratio() <= floor or matcher.quick_ratio() <= floor:
                continue
            score = matcher.ratio()
            if score > best.similarity:
                best = Nearest(similarity=score, ref=ref)
        return best


def _name_of(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr.lower()
    if isinstance(func, ast.Name):
        return func.id.lower()
    return None


def operator_signature(code: str) -> frozenset[str]:
    """Lower-case names of the operators `Model` uses (see the module docstring)."""
    tree = _parse(code)
    cls = _model_class(tree) if tree is not None else None
    if cls is None:
        return frozenset()
    modules: dict[str, str] = {}
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            for target in node.targets:
                name = _name_of(node.value.func)
                if isinstance(target, ast.Attribute) and name and name not in ("parameter", "randn", "rand"):
                    modules[target.attr] = name
    ops: set[str] = set()
    for fn in cls.body:
        if not isinstance(fn, ast.FunctionDef) or fn.name == "__init__":
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
                ops.add(_BINOPS[type(node.op)])
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute):
                base = func.value
                if isinstance(base.value, ast.Name) and base.value.id == "self" and base.attr in modules:
                    ops.add(func.attr.lower())  # a method of a submodule, e.g. self.lstm.flatten_parameters
                    continue
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
                ops.add(modules.get(func.attr, func.attr.lower()))
            elif (name := _name_of(func)) is not None and name not in ("super", "size", "view", "reshape"):
                ops.add(name)
    return frozenset(ops)


def exact_key(code: str) -> str:
    """Same for two sources with the same module AST (formatting and comments ignored)."""
    tree = _parse(code)
    text = ast.dump(tree) if tree is not None else code
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def near_key(code: str) -> str:
    """Same for two sources that differ only in identifiers, formatting and comments."""
    tree = _parse(code)
    if tree is None:
        return exact_key(code)
    out: list[str] = []
    _tokens(tree, True, out)
    return hashlib.sha256("\x00".join(out).encode()).hexdigest()[:24]
