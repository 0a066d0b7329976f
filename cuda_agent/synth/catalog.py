"""The operator catalogue: what each torch operator needs to run, learnt by probing the installed torch.

Candidates are crawled from `torch.nn` (module classes), `torch` and `torch.nn.functional` (functions)
and `torch.Tensor` (methods that have no `torch.` function of the same name). Each is called on small
CPU tensors of rank 1-5 with a few call templates; what ran decides the entry (accepted ranks, the call
template, the shape rule, whether the output is float). Two more calls tell whether it is stochastic
(same input, different RNG state) and input-dependent (different inputs, same RNG state). A candidate
that cannot be described lands in `rejected` with the reason, never silently dropped.

Probing runs candidate torch functions, some of which touch global state when misused; `crawl_catalog`
therefore runs it in a child process (`python -m cuda_agent.synth.catalog OUT.json`).
"""

from __future__ import annotations

import inspect
import json
import sys
import warnings
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from cuda_agent.synth.overrides import (
    CALL_OVERRIDES,
    CALL_TEMPLATES,
    CTOR_BINDINGS,
    CTOR_OVERRIDES,
    SKIP_FUNCTION_PREFIXES,
    SKIP_NAMES,
)

ShapeRule = Literal["same", "reduce", "reshape", "resize"]
PROBE_SHAPES: dict[int, tuple[int, ...]] = {1: (24,), 2: (4, 24), 3: (2, 8, 12), 4: (2, 8, 6, 6), 5: (2, 8, 4, 4, 4)}
"""Probe input per rank; dim 1 is 8 so channel-bound arguments (GroupNorm's 4 groups) divide it."""


CATALOG_VERSION = 2
"""Bumped whenever probing changes, so a cached catalogue from older rules is not reused."""


class OpSpec(BaseModel):
    """One operator the composer can use."""

    name: str = Field(description="Ops-6K style name: 'nn.Conv2d', 'torch.relu', 'F.gelu', 'Tensor.abs'.")
    kind: Literal["module", "function", "method"]
    ctor_args: dict[str, str] = Field(
        default_factory=dict,
        description="Constructor argument -> binding: 'C' (input dim 1), 'L' (last dim) or a Python literal.",
    )
    call_args: str = Field(default="", description="Source of the extra call arguments after the input, e.g. 'dim=1'.")
    ranks: list[int] = Field(description="Input ranks it ran on.")
    shape_rule: ShapeRule = Field(description="Output shape vs input: same, reduce (lower rank), reshape, resize.")
    float_output: bool = Field(description="Whether the output is a floating tensor (else only the last op).")
    stochastic: bool = Field(description="Output changed with the RNG state on the same input.")


class RejectedOp(BaseModel):
    """A candidate that cannot be described, with why."""

    name: str
    reason: str


class OpCatalog(BaseModel):
    """The crawl result for one torch version."""

    torch_version: str
    ops: list[OpSpec]
    rejected: list[RejectedOp]

    def usable(self) -> list[OpSpec]:
        """Operators the composer may draw: deterministic ones (stochastic ones fail a filter anyway)."""
        return [op for op in self.ops if not op.stochastic]


def resolve_ctor_args(spec: OpSpec, shape: tuple[int, ...]) -> dict[str, Any]:
    """Constructor arguments for an input of `shape`."""
    values: dict[str, Any] = {}
    for arg, binding in spec.ctor_args.items():
        if binding == "C":
            values[arg] = shape[1] if len(shape) > 1 else shape[0]
        elif binding == "L":
            values[arg] = shape[-1]
        else:
            values[arg] = eval(binding, {})  # bindings are literals from our own override table
    return values


def build_op(spec: OpSpec, shape: tuple[int, ...]) -> Any:
    """A callable `f(x)` for the operator (a constructed module, or the function with its extra args)."""
    import torch
    import torch.nn.functional as F

    if spec.kind == "module":
        return getattr(torch.nn, spec.name.split(".", 1)[1])(**resolve_ctor_args(spec, shape))
    namespace = {"torch": torch, "F": F}
    extra = f", {spec.call_args}" if spec.call_args else ""
    attr = spec.name.split(".", 1)[1]
    source = f"lambda x: x.{attr}({spec.call_args})" if spec.kind == "method" else f"lambda x: {spec.name}(x{extra})"
    return eval(source, namespace)


def candidates() -> list[tuple[str, str]]:
    """(name, kind) of every operator worth probing in the installed torch."""
    import torch
    import torch.nn.functional as F

    found: list[tuple[str, str]] = []
    for attr in sorted(dir(torch.nn)):
        obj = getattr(torch.nn, attr)
        if attr.startswith(("_", *SKIP_FUNCTION_PREFIXES)):
            continue
        if isinstance(obj, type) and issubclass(obj, torch.nn.Module):
            found.append((f"nn.{attr}", "module"))
    torch_functions = set()
    for prefix, namespace in (("torch", torch), ("F", F)):
        for attr in sorted(dir(namespace)):
            obj = getattr(namespace, attr)
            if attr.startswith("_") or attr.endswith("_") or isinstance(obj, type) or not callable(obj):
                continue
            if inspect.ismodule(obj) or attr.startswith(SKIP_FUNCTION_PREFIXES):
                continue
            torch_functions.add(attr)
            found.append((f"{prefix}.{attr}", "function"))
    for attr in sorted(dir(torch.Tensor)):
        if (
            attr.startswith("_")
            or attr.endswith("_")
            or attr in torch_functions
            or attr.startswith(SKIP_FUNCTION_PREFIXES)
        ):
            continue
        if callable(getattr(torch.Tensor, attr, None)):
            found.append((f"Tensor.{attr}", "method"))
    return [(name, kind) for name, kind in found if name not in SKIP_NAMES]


def _ctor_bindings(name: str) -> dict[str, str] | str:
    """Bindings for a module's required constructor arguments, or the reason there are none."""
    import torch

    if name in CTOR_OVERRIDES:
        return dict(CTOR_OVERRIDES[name])
    cls = getattr(torch.nn, name.split(".", 1)[1])
    try:
        params = inspect.signature(cls.__init__).parameters.values()
    except (TypeError, ValueError):
        return "constructor signature is not introspectable"
    bindings = {}
    for p in params:
        if p.name == "self" or p.default is not inspect.Parameter.empty:
            continue
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if p.name not in CTOR_BINDINGS:
            return f"required constructor argument {p.name!r} has no binding rule"
        bindings[p.name] = CTOR_BINDINGS[p.name]
    return bindings


def _shape_rule(in_shape: tuple[int, ...], out_shape: tuple[int, ...]) -> ShapeRule:
    if out_shape == in_shape:
        return "same"
    if len(out_shape) < len(in_shape):
        return "reduce"
    n_in, n_out = 1, 1
    for d in in_shape:
        n_in *= d
    for d in out_shape:
        n_out *= d
    return "reshape" if n_in == n_out else "resize"


def _run(spec: OpSpec, rank: int, seed: int, input_seed: int, op: Any = None) -> Any:
    """Call the operator on a seeded probe input under RNG state `seed` (building it, seeded 0, if not given)."""
    import torch

    torch.manual_seed(input_seed)
    x = torch.randn(PROBE_SHAPES[rank])
    if op is None:
        torch.manual_seed(0)
        op = build_op(spec, PROBE_SHAPES[rank])
    torch.manual_seed(seed)
    with torch.no_grad():
        return op(x)


def _same(a: Any, b: Any) -> bool:
    """Equal shapes and values, NaN equal to NaN (log of a negative is not randomness)."""
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        return torch.equal(torch.nan_to_num(a, nan=0.0), torch.nan_to_num(b, nan=0.0))
    return torch.equal(a, b)


def _try_template(spec: OpSpec) -> tuple[list[int], Any, str]:
    """Ranks the spec runs on (with a tensor output), the first output, and the last error."""
    import torch

    ranks, first, error = [], None, "no rank ran"
    for rank in PROBE_SHAPES:
        try:
            out = _run(spec, rank, 0, 0)
        except Exception as exc:  # probing: any failure just means "not this way"
            error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:160]
            continue
        if not isinstance(out, torch.Tensor):
            error = f"returns {type(out).__name__}, not a tensor"
            continue
        if out.numel() == 0 or out.is_complex() or out.dtype in (torch.float16, torch.bfloat16):
            error = f"returns an empty or {out.dtype} tensor"
            continue
        ranks.append(rank)
        first = (rank, out) if first is None else first
    return ranks, first, error


def probe(name: str, kind: str) -> OpSpec | RejectedOp:
    """Describe one candidate by running it, or say why it cannot be described."""

    ctor: dict[str, str] = {}
    if kind == "module":
        bindings = _ctor_bindings(name)
        if isinstance(bindings, str):
            return RejectedOp(name=name, reason=bindings)
        ctor = bindings
    templates = [CALL_OVERRIDES[name]] if name in CALL_OVERRIDES else ([""] if kind == "module" else CALL_TEMPLATES)
    result: OpSpec | RejectedOp = RejectedOp(name=name, reason="no call template")
    for call_args in templates:
        # A call that warns of deprecation (F.softmax without dim, torch.chain_matmul) is not kept: try the next.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = _probe_templates(name, kind, ctor, [call_args])
        if any("deprecated" in str(w.message).lower() for w in caught):
            result = RejectedOp(name=name, reason="deprecated (torch warns when it is called this way)")
        elif isinstance(result, OpSpec) or "did not run" not in result.reason:
            return result
    return result


def _probe_templates(name: str, kind: str, ctor: dict[str, str], templates: list[str]) -> OpSpec | RejectedOp:
    import torch

    error = "no call template ran"
    for call_args in templates:
        spec = OpSpec(name=name, kind=kind, ctor_args=ctor, call_args=call_args, ranks=[1], shape_rule="same",
                      float_output=True, stochastic=False)  # fmt: skip
        ranks, first, error = _try_template(spec)
        if not ranks:
            continue
        rank, _ = first
        try:
            # One module instance for all calls: its weights are drawn once, as in a problem's __init__.
            torch.manual_seed(0)
            op = build_op(spec, PROBE_SHAPES[rank])
            out = _run(spec, rank, 0, 0, op)
            stochastic = not _same(_run(spec, rank, 1, 0, op), out)
            independent = _same(_run(spec, rank, 0, 1, op), out)
        except Exception as exc:  # ran once but not again (e.g. no equality for its dtype)
            return RejectedOp(name=name, reason=f"second probe call failed: {type(exc).__name__}")
        if not stochastic and _same(out, torch.randn(PROBE_SHAPES[rank], generator=torch.Generator().manual_seed(0))):
            return RejectedOp(name=name, reason="returns its input unchanged (an identity at these arguments)")
        if not stochastic and independent:
            return RejectedOp(name=name, reason="output does not depend on the input values")
        return spec.model_copy(
            update={
                "ranks": ranks,
                "shape_rule": _shape_rule(PROBE_SHAPES[rank], tuple(out.shape)),
                "float_output": out.is_floating_point(),
                "stochastic": stochastic,
            }
        )
    return RejectedOp(name=name, reason=f"did not run on float32 inputs of rank 1-5: {error}")


def build_catalog() -> OpCatalog:
    """Probe every candidate in this process (prefer `crawl_catalog`, which isolates it)."""
    import torch

    ops: list[OpSpec] = []
    rejected: list[RejectedOp] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, kind in candidates():
            result = probe(name, kind)
            (ops if isinstance(result, OpSpec) else rejected).append(result)
    return OpCatalog(torch_version=torch.__version__, ops=ops, rejected=rejected)


def load_catalog(path: Path) -> OpCatalog:
    """Read a catalogue written by `crawl_catalog`."""
    return OpCatalog.model_validate(json.loads(path.read_text()))


def crawl_catalog(cache_dir: Path, timeout_s: float = 600.0) -> OpCatalog:
    """The catalogue of the installed torch: crawled once in a child process, then read from the cache.

    Raises:
        SandboxError: the crawl died or ran past `timeout_s`.
    """
    import torch

    from cuda_agent.errors import SandboxError
    from cuda_agent.subproc import child_env, run_module

    path = cache_dir / "synth" / f"catalog-v{CATALOG_VERSION}-torch-{torch.__version__}.json"
    if path.is_file():
        return load_catalog(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    result = run_module("cuda_agent.synth.catalog", [str(tmp)], timeout_s, env=child_env({"CUDA_VISIBLE_DEVICES": ""}))
    if result.returncode != 0 or not tmp.is_file():
        raise SandboxError(
            f"crawling the operator catalogue failed (exit {result.returncode}, timed out: {result.timed_out}): "
            f"{result.stderr[-800:]}; rerun, or delete {path.parent} if the cache is stale"
        )
    tmp.replace(path)  # written last, so an existing file is always a complete crawl
    return load_catalog(path)


def main(argv: list[str]) -> int:
    Path(argv[0]).write_text(build_catalog().model_dump_json(indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
