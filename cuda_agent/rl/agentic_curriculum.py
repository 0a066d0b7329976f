"""The agentic curriculum: twelve small tasks, each with four hand-written kernels, for multi-turn training.

Each task is an Ops-6K-style problem in KernelBench's format (`Model`, `get_inputs`,
`get_init_inputs`): elementwise ops, fused pairs and row reductions over float32 (rows, cols)
inputs. For each, on the CPU (one C++ file holding the OpenMP loop and its `REGISTER_BINDING`)
and on CUDA (a `.cu` kernel and launcher plus a `_binding.cpp`), four kernels are rendered from
the templates in `agentic_kernels/`:

| kernel | what it is | the judge's verdict |
| --- | --- | --- |
| `fast`   | one parallel pass (CPU: OpenMP; CUDA: a thread per element, a block per row) | pass, reward 1-3 |
| `slow`   | correct but serial: a strided single-thread walk (CPU), one block for the whole tensor or a thread per row (CUDA) | pass, reward 1 |
| `broken` | stores to an undeclared name: `utils/compile.sh` prints "'d' was not declared" / "identifier "d" is undefined" | compile_error, -1 |
| `wrong`  | builds, but computes another function (e.g. relu as identity) | incorrect, -1 |

Sizes follow the device: on the CPU 256 x 1024 (1 MiB a tensor), so that the judge's trials take
seconds on two cores; on CUDA 4096 x 8192 (128 MiB a tensor), where the time is memory traffic
rather than the ~0.05 ms a call costs (curriculum.py's docstring measured that on the H200).

`HELD_OUT` tasks are never in a training row (SFT or PPO); they measure whether what was learnt
(using the tools: verify before finishing, read and fix a compile error) carries over to problems
the model never saw. They cover every family the training tasks have: a unary op, a fused pair, a
binary op and a row reduction.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cuda_agent.errors import ConfigError
from cuda_agent.types import Task

TEMPLATES = Path(__file__).parent / "agentic_kernels"
KERNELS = ("fast", "slow", "broken", "wrong")
"""The kernels of every task (module docstring)."""
SIZES = {"cpu": (256, 1024), "cuda": (4096, 8192)}
"""(rows, cols) of every input on each device; row reductions on CUDA use (cols, rows): more rows to spread."""


@dataclass(frozen=True)
class AgenticTask:
    """One task of the curriculum: its reference in torch and its per-element (or per-row) formula in C."""

    name: str
    """Task name; its reference is `agentic/<name>`, its extension function `cuda_extension.<name>`."""
    doc: str
    """One line on what Model computes (model.py's docstring)."""
    args: tuple[str, ...]
    """forward()'s inputs, each a float32 (rows, cols) tensor: ('x',) or ('x', 'y')."""
    torch: str
    """forward()'s return expression in torch."""
    expr: str
    """Elementwise: the output element from `a[i]` (and `b[i]`). Row reduction: the step from `acc` and `v`."""
    wrong: str
    """The `wrong` kernel's expr: plausible, builds, and fails the judge's correctness check."""
    init: str = ""
    """Row reduction only: the accumulator's start value (empty for elementwise tasks)."""

    @property
    def ref(self) -> str:
        return f"agentic/{self.name}"

    @property
    def rows(self) -> bool:
        """True for a row reduction: (rows, cols) -> (rows,)."""
        return bool(self.init)


TASKS = (
    AgenticTask("relu", "relu(x)", ("x",), "torch.relu(x)", "a[i] > 0.f ? a[i] : 0.f", "a[i]"),
    AgenticTask("square", "x * x", ("x",), "x * x", "a[i] * a[i]", "a[i] + a[i]"),
    AgenticTask("scale_shift", "x * 0.5 + 1", ("x",), "x * 0.5 + 1.0", "a[i] * 0.5f + 1.f", "a[i] * 0.5f"),
    AgenticTask("sigmoid", "sigmoid(x)", ("x",), "torch.sigmoid(x)", "1.f / (1.f + expf(-a[i]))", "expf(-a[i])"),
    AgenticTask("add_relu", "relu(x + y)", ("x", "y"), "torch.relu(x + y)", "fmaxf(a[i] + b[i], 0.f)", "a[i] + b[i]"),
    AgenticTask("mul_add", "x * y + x", ("x", "y"), "x * y + x", "a[i] * b[i] + a[i]", "a[i] * b[i]"),
    AgenticTask("sub_abs", "|x - y|", ("x", "y"), "torch.abs(x - y)", "fabsf(a[i] - b[i])", "a[i] - b[i]"),
    AgenticTask("row_sum", "the sum of each row", ("x",), "x.sum(dim=1)", "acc + v", "acc + fabsf(v)", init="0.f"),
    AgenticTask(
        "clamp",
        "x clamped to [-1, 1]",
        ("x",),
        "torch.clamp(x, -1.0, 1.0)",
        "fminf(fmaxf(a[i], -1.f), 1.f)",
        "fmaxf(a[i], -1.f)",
    ),
    AgenticTask(
        "swish",
        "x * sigmoid(x)",
        ("x",),
        "x * torch.sigmoid(x)",
        "a[i] / (1.f + expf(-a[i]))",
        "1.f / (1.f + expf(-a[i]))",
    ),
    AgenticTask("max_pair", "max(x, y)", ("x", "y"), "torch.maximum(x, y)", "fmaxf(a[i], b[i])", "fminf(a[i], b[i])"),
    AgenticTask(
        "row_max", "the max of each row", ("x",), "x.amax(dim=1)", "fmaxf(acc, v)", "fminf(acc, v)", init="-INFINITY"
    ),
)
HELD_OUT = ("clamp", "swish", "max_pair", "row_max")
"""Never trained on (module docstring): one of each family."""


def task_named(name: str) -> AgenticTask:
    """The curriculum task called `name`.

    Raises:
        ConfigError: no such task.
    """
    for task in TASKS:
        if task.name == name:
            return task
    raise ConfigError(f"no agentic curriculum task {name!r}; have: {', '.join(t.name for t in TASKS)}")


def split(held_out: bool) -> list[AgenticTask]:
    """The training tasks (`held_out=False`) or the held-out ones."""
    return [task for task in TASKS if (task.name in HELD_OUT) == held_out]


def _render(template: str, **values: object) -> str:
    import jinja2

    text = (TEMPLATES / template).read_text()
    return jinja2.Template(text, undefined=jinja2.StrictUndefined, keep_trailing_newline=True).render(**values)


def _check_device(device: str) -> None:
    if device not in SIZES:
        raise ConfigError(f"unknown device {device!r}: use one of {', '.join(SIZES)}")


def problem(task: AgenticTask, device: str) -> Task:
    """The task at `device`'s sizes (module docstring), as the `Task` an episode and the judge take.

    Raises:
        ConfigError: unknown device.
    """
    _check_device(device)
    rows, cols = SIZES[device]
    if task.rows and device == "cuda":
        rows, cols = cols, rows
    code = _render("problem.py.jinja", doc=task.doc, args=task.args, torch=task.torch, rows=rows, cols=cols)
    return Task(ref=task.ref, name=task.name, source="curriculum", code=code)


def kernel_files(task: AgenticTask, kernel: str, device: str) -> dict[str, str]:
    """The workspace files of one kernel of `task` (path -> text): the kernel, on CUDA its binding; no model_new.py.

    Raises:
        ConfigError: unknown kernel or device.
    """
    _check_device(device)
    if kernel not in KERNELS:
        raise ConfigError(f"unknown kernel {kernel!r}: use one of {', '.join(KERNELS)}")
    expr = task.wrong if kernel == "wrong" else task.expr
    values = {"name": task.name, "variant": kernel, "args": task.args, "ptrs": ("a", "b")[: len(task.args)]}
    shape = "rows" if task.rows else "map"
    if task.rows:
        values.update(step=expr, init=task.init)
    else:
        values["expr"] = expr
    if device == "cpu":
        return {f"kernels/{task.name}.cpp": _render(f"cpu_{shape}.cpp.jinja", **values)}
    return {
        f"kernels/{task.name}.cu": _render(f"cuda_{shape}.cu.jinja", **values),
        f"kernels/{task.name}_binding.cpp": _render("cuda_binding.cpp.jinja", rows=task.rows, **values),
    }


def model_new(task: AgenticTask) -> str:
    """model_new.py for `task`: ModelNew calls `cuda_extension.<name>` (the same on both devices)."""
    return _render("model_new.py.jinja", name=task.name, args=task.args)
