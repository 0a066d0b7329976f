"""The rule-based composer: stack 1-5 catalogue operators into one KernelBench-format problem.

Each candidate is a pure function of (seed, index): the same seed gives the same problems in any order
and on any number of workers, which is what makes a run resumable. Shapes are valid by construction:
every step is called on `meta` tensors of the current shape (no memory, no compute) before it is kept.
"""

from __future__ import annotations

import math
import random
import re
from typing import Any, Literal

from pydantic import BaseModel, Field

from cuda_agent.synth.catalog import OpSpec, build_op, resolve_ctor_args

OPS6K_DEPTH_MIX: dict[int, float] = {1: 3.40, 2: 83.77, 3: 7.62, 4: 2.80, 5: 1.23}
"""Share (percent) of 1..5-operator problems in Ops-6K (the paper's figures, measured on the parquet)."""

_RANK_WEIGHTS = {2: 2, 3: 2, 4: 4, 5: 1}
_KIND_WEIGHTS = {"module": 0.45, "torch": 0.35, "F": 0.1, "Tensor": 0.1}
"""Ops-6K draws about as many `nn.` modules as `torch.` functions; a uniform draw over the catalogue
would be mostly elementwise `torch.` functions."""
_DIM_NAMES = {1: ["size"], 2: ["batch_size", "features"], 3: ["batch_size", "channels", "length"]}
_DIM_NAMES |= {
    4: ["batch_size", "channels", "height", "width"],
    5: ["batch_size", "channels", "depth", "height", "width"],
}


class ComposeConfig(BaseModel):
    """How problems are composed."""

    depth_mix: dict[int, float] = Field(default_factory=lambda: dict(OPS6K_DEPTH_MIX))
    """Relative weight of each number of operators (1-5)."""
    device: Literal["cpu", "cuda"] = "cpu"
    """Where the problems will be timed; picks the input sizes."""
    min_numel: int | None = None
    """Fewest input elements (default: 2**18 on the CPU, 2**23 on CUDA)."""
    max_numel: int | None = None
    """Most input elements (default: 2**22 on the CPU, 2**27 on CUDA: Ops-6K's outputs have a median of 2**25.6
    elements, and on the H200 most 2**22-2**26 chains ran under 1 ms once timed alone)."""
    max_growth: float = 8.0
    """An operator may grow the tensor at most this many times (keeps padding/upsampling chains sane)."""
    max_params: int = 2**24
    """Most parameters per operator (64 MB in fp32): meta tensors cost nothing, so an RNNCell whose hidden size
    is bound to a 50,000-wide last dim would otherwise pass composition and allocate 10 GB in the filter."""
    attempts: int = 40
    """Draws per candidate before it is given up as 'uncomposable'."""

    max_resized_numel: int | None = None
    """Most input elements of a problem scaled up after it ran faster than the window (default 4 x the top
    of `numel_range` on the CPU, 2**28 (1 GiB in fp32) on CUDA, where 12 workers hold their chains at once)."""

    def numel_range(self) -> tuple[int, int]:
        lo, hi = (2**18, 2**22) if self.device == "cpu" else (2**23, 2**27)
        return self.min_numel or lo, self.max_numel or hi

    def resized_numel_cap(self) -> int:
        return self.max_resized_numel or (4 * self.numel_range()[1] if self.device == "cpu" else 2**28)


class Step(BaseModel):
    """One operator of a composed problem with its resolved constructor arguments."""

    spec: OpSpec
    ctor_values: dict[str, Any]
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]


class Candidate(BaseModel):
    """A composed problem before filtering."""

    index: int = Field(description="Position in the seeded stream of candidates.")
    ops: list[str] = Field(description="Operator names, in order (the Ops-6K `ops` column).")
    code: str = Field(description="The problem source in KernelBench format.")
    composer: str = Field(default="rules", description="'rules' or the model spec that wrote it.")
    scale: float = Field(default=1.0, description="Its batch dimension's factor over the first try (see `resize`).")


def draw_depth(rng: random.Random, mix: dict[int, float]) -> int:
    depths = sorted(mix)
    return rng.choices(depths, weights=[mix[d] for d in depths])[0]


def draw_shape(rng: random.Random, rank: int, numel_range: tuple[int, int]) -> tuple[int, ...]:
    """A shape with batch and channel dims from short lists and the rest set to reach a log-uniform numel."""
    lo, hi = numel_range
    target = math.exp(rng.uniform(math.log(lo), math.log(hi)))
    if rank == 1:
        return (int(target),)
    batch = rng.choice([8, 16, 32, 64, 128])
    if rank == 2:
        return (batch, max(8, int(target / batch) // 8 * 8))
    channels = rng.choice([8, 16, 32, 64])
    rest = rank - 2
    side = max(4, round((target / (batch * channels)) ** (1 / rest)))
    return (batch, channels, *([side] * rest))


def _try_step(spec: OpSpec, shape: tuple[int, ...], config: ComposeConfig) -> Step | None:
    import warnings

    import torch

    try:
        with torch.device("meta"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # composing draws many operators; their usage warnings are noise here
            op = build_op(spec, shape)
            out = op(torch.empty(shape))
    except Exception:  # this operator does not fit this shape; the caller draws another
        return None
    if not isinstance(out, torch.Tensor) or not 1 <= out.dim() <= 5 or out.numel() == 0:
        return None
    if out.numel() > config.max_growth * math.prod(shape):
        return None
    if isinstance(op, torch.nn.Module) and sum(p.numel() for p in op.parameters()) > config.max_params:
        return None
    return Step(spec=spec, ctor_values=resolve_ctor_args(spec, shape), in_shape=shape, out_shape=tuple(out.shape))


def _pick(rng: random.Random, by_kind: dict[str, list[OpSpec]]) -> OpSpec:
    kinds = [k for k in _KIND_WEIGHTS if by_kind.get(k)]
    kind = rng.choices(kinds, weights=[_KIND_WEIGHTS[k] for k in kinds])[0]
    return rng.choice(by_kind[kind])


def draw_steps(rng: random.Random, ops: list[OpSpec], depth: int, shape: tuple[int, ...], config: ComposeConfig):
    """Steps for `depth` operators starting from `shape`, or None if no chain fitted."""
    steps: list[Step] = []
    for position in range(depth):
        last = position == depth - 1
        current = steps[-1].out_shape if steps else shape
        fitting = [
            op
            for op in ops
            if len(current) in op.ranks and (op.float_output or last) and (not steps or op.name != steps[-1].spec.name)
        ]
        by_kind: dict[str, list[OpSpec]] = {}
        for op in fitting:
            by_kind.setdefault("module" if op.kind == "module" else op.name.split(".")[0], []).append(op)
        for _ in range(12):
            if not fitting:
                return None
            step = _try_step(_pick(rng, by_kind), current, config)
            if step is not None:
                steps.append(step)
                break
        else:
            return None
    return steps


def compose(ops: list[OpSpec], seed: int, index: int, config: ComposeConfig) -> Candidate | None:
    """The candidate at `index` of the stream for `seed`, or None if no valid chain was found."""
    rng = random.Random(f"{seed}:{index}")
    depth = draw_depth(rng, config.depth_mix)
    for _ in range(config.attempts):
        rank = rng.choices(list(_RANK_WEIGHTS), weights=list(_RANK_WEIGHTS.values()))[0]
        shape = draw_shape(rng, rank, config.numel_range())
        steps = draw_steps(rng, ops, depth, shape, config)
        if steps:
            return Candidate(index=index, ops=[s.spec.name for s in steps], code=render(steps, shape))
    return None


def _attr(name: str, taken: set[str]) -> str:
    base = name.split(".")[-1].lower()
    attr, n = base, 1
    while attr in taken:
        n += 1
        attr = f"{base}{n}"
    taken.add(attr)
    return attr


def _call_line(step: Step, attr: str | None) -> str:
    spec = step.spec
    if spec.kind == "module":
        return f"x = self.{attr}(x)"
    if spec.kind == "method":
        return f"x = x.{spec.name.split('.', 1)[1]}({spec.call_args})"
    extra = f", {spec.call_args}" if spec.call_args else ""
    return f"x = {spec.name}(x{extra})"


def render(steps: list[Step], shape: tuple[int, ...]) -> str:
    """KernelBench-format source: class Model, module-level size constants, get_inputs, get_init_inputs."""
    taken: set[str] = set()
    params: list[tuple[str, Any]] = []
    init_lines, forward_lines = [], []
    for step in steps:
        attr = _attr(step.spec.name, taken) if step.spec.kind == "module" else None
        if attr is not None:
            kwargs = []
            for arg, value in step.ctor_values.items():
                params.append((f"{attr}_{arg}", value))
                kwargs.append(f"{arg}={attr}_{arg}")
            init_lines.append(f"self.{attr} = nn.{step.spec.name.split('.', 1)[1]}({', '.join(kwargs)})")
        forward_lines.append(_call_line(step, attr))
    dims = _DIM_NAMES[len(shape)]
    signature = "".join(f", {name}" for name, _ in params)
    body = [f"        {line}" for line in init_lines]
    lines = ["import torch", "import torch.nn as nn", "import torch.nn.functional as F", "", ""]
    lines += ["class Model(nn.Module):", f"    def __init__(self{signature}):", "        super().__init__()", *body, ""]
    lines += ["    def forward(self, x):", *[f"        {line}" for line in forward_lines], "        return x", "", ""]
    lines += [f"{name} = {value}" for name, value in zip(dims, shape, strict=True)]
    lines += [f"{name} = {value!r}" for name, value in params]
    lines += ["", "", "def get_inputs():", f"    return [torch.randn({', '.join(dims)})]", "", ""]
    lines += ["def get_init_inputs():", f"    return [{', '.join(name for name, _ in params)}]", ""]
    return "\n".join(lines)


_SIZE_LINE = re.compile(r"^(size|batch_size|features|channels|length|depth|height|width) = (\d+)$", re.M)


def resize(code: str, factor: float, max_numel: int) -> tuple[str, float] | None:
    """`code` with its first dimension (`batch_size`, or `size` for rank 1) times about `factor`, and the factor
    applied; None if the source has no such constants or the cap leaves less than 1.5x.

    Most composed chains are memory-bound: time grows with the batch, so a problem that ran faster than
    the window is worth one more try at the size the window asks for. Its other dimensions stay, so the
    constructor arguments bound to them (features, channels) still fit.
    """
    sizes = [(m, int(m.group(2))) for m in _SIZE_LINE.finditer(code)]
    if not sizes or sizes[0][0].group(1) not in ("size", "batch_size"):
        return None
    numel = math.prod(value for _, value in sizes)
    factor = min(factor, max_numel / numel)
    if factor < 1.5:
        return None
    first, value = sizes[0]
    new_value = round(value * factor)
    if first.group(1) == "size" or value % 8 == 0:
        new_value = max(8, new_value // 8 * 8)  # keep the alignment the composer gave it
    line = f"{first.group(1)} = {new_value}"
    return code[: first.start()] + line + code[first.end() :], new_value / value
