"""The paper's four filters, run on one problem inside a filter worker process (`worker.py`).

1. runs: eager forward works, and `torch.compile` of the model runs on the same inputs;
2. deterministic: no stochastic operator, judged twice: by name in `forward` (dropout, rand*, bernoulli,
   ...) and by running the same inputs under two RNG states;
3. input-dependent: the output is not constant and differs between two input draws;
4. eager time inside a window (1-100 ms by default), measured with the judge's timing protocol.

Cheap checks run first; with `short_circuit` the first failure ends the problem (synthesis), without it
every filter is evaluated (to report how a data set fares on each, e.g. Ops-6K).
"""

from __future__ import annotations

import ast
import re
import time
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

FILTERS = ("runs_eager", "deterministic", "input_dependent", "time_window", "runs_compile")
"""Filter names in the order they run; also the rejection reasons, with 'timeout', 'crash' and 'out_of_memory'."""

OUT_OF_MEMORY = "out_of_memory"
"""Not a verdict: workers share the device's memory, so one problem's allocation can fail for a neighbour's.
The audit runs such problems again alone (`audit.py`); synthesis drops them."""


def out_of_memory(exc: BaseException) -> bool:
    # TaskError wraps what get_inputs() raised, so the message is the only common ground; Python's own
    # MemoryError (an allocation past the worker's address-space cap) may carry no message at all.
    return isinstance(exc, MemoryError) or "out of memory" in str(exc) or "can't allocate memory" in str(exc)


FAR_PAST_WINDOW = 3.0
"""A warm call this many times the window's upper end fails the time filter without the full protocol."""

_STOCHASTIC = re.compile(r"dropout|\brand|bernoulli|multinomial|poisson|rrelu|\.normal_|uniform_|exponential_", re.I)


class FilterConfig(BaseModel):
    """What the filters accept."""

    device: Literal["cpu", "cuda"] = "cpu"
    min_ms: float = 1.0
    """Eager time window, lower end (ms)."""
    max_ms: float = 100.0
    """Eager time window, upper end (ms)."""
    short_circuit: bool = True
    """Stop at the first failed filter (synthesis); False evaluates all (data-set reports)."""
    timeout_s: float = 180.0
    """Per problem, from the moment a warm worker receives it."""
    wait_cap: float = 5.0
    """Waiting for GPU turns stops the time limit's clock, up to this many time limits (pool.py)."""
    startup_s: float = 600.0
    """For a worker to start and warm up (torch import, CUDA, a first torch.compile: many at once are slow)."""
    threads: int = 1
    """torch intra-op threads per worker (on CUDA they only build models and draw CPU-side values)."""
    compile: bool = True
    """Run the torch.compile filter; off only for quick dry runs and tests (the paper's filter needs it)."""
    turns_dir: str | None = None
    """Lock folder of the workers sharing this GPU (gpu_turns.py): timings then run alone. Set by FilterPool."""
    memory_cap_bytes: int | None = None
    """Address space each CPU worker may map (RLIMIT_AS; CUDA maps far more than it uses): set by FilterPool to
    the cap of `tasks show --inspect` (free memory x HEADROOM) shared out among its workers, so that a problem
    too big fails in its worker as out_of_memory instead of waking the kernel's OOM killer for the machine."""


class FilterRequest(BaseModel):
    """One problem for a filter worker (worker.py), a line on its stdin."""

    model_config = ConfigDict(extra="forbid")

    index: int
    code: str
    result: str = Field(description="The file it writes its FilterResult to.")


class FilterResult(BaseModel):
    """What the filters found for one problem."""

    index: int
    passed: bool = False
    reason: str | None = Field(
        default=None, description="First failed filter, 'timeout', 'crash', 'out_of_memory' or 'error'."
    )
    checks: dict[str, bool] = Field(default_factory=dict, description="Filter name -> passed, for those evaluated.")
    eager_ms: float | None = Field(
        default=None, description="Median eager time; one warm call's time when that is far past the window."
    )
    compile_first_s: float | None = Field(default=None, description="Wall time of the first compiled call.")
    compile_matches: bool | None = Field(default=None, description="Compiled output allclose(1e-2) to eager.")
    output_shape: list[int] | None = None
    detail: str = ""
    wall_s: float | None = Field(default=None, description="The worker's time on this problem, waits included.")
    turn_wait_s: float | None = Field(default=None, description="Of which waiting for GPU turns (gpu_turns.py).")
    stage_s: dict[str, float] = Field(default_factory=dict, description="Seconds per filter evaluated, waits included.")


def forward_source(code: str) -> str:
    """Source of `Model.forward` (where randomness makes a problem stochastic; `__init__` may draw weights)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            parts = [ast.get_source_segment(code, f) or "" for f in node.body if isinstance(f, ast.FunctionDef)]
            return "\n".join(p for p, f in zip(parts, node.body, strict=False) if not p.startswith("def __init__"))
    return code


def _flat(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _flat(v)]
    return []


def _equal(a: list[Any], b: list[Any]) -> bool:
    import torch

    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if x.is_floating_point():
            if not torch.allclose(x, y, rtol=1e-5, atol=1e-6, equal_nan=True):
                return False
        elif not torch.equal(x, y):
            return False
    return True


def _constant(outputs: list[Any]) -> bool:
    """All outputs constant (one value, or all NaN): nothing of the input survives."""
    for t in outputs:
        flat = t.detach().reshape(-1)
        if flat.numel() > 1 and not bool((flat == flat[0]).all()):
            return False
    return True


def _forward(model: Any, inputs: list[Any], seed: int, device: str = "cpu") -> list[Any]:
    import torch

    torch.manual_seed(seed)
    with torch.no_grad():
        outputs = _flat(model(*inputs))
    if device == "cuda":
        torch.cuda.synchronize()  # the kernels end inside the caller's GPU turn, not after it
    return outputs


def _time_eager(model: Any, inputs: list[Any], config: FilterConfig, clock: Any, flush: Any) -> float:
    import torch

    from cuda_agent.judge import rotate, time_phase

    def call(values: Any) -> Any:
        with torch.no_grad():
            return model(*values)

    # The model has run three times already (warm); a call far past the window decides the filter
    # alone, and spares the other workers, who wait while this one times, a full phase of slow calls.
    once = time_phase(
        call, rotate([inputs]), clock, flush, config.device, warmup_reps=0, min_reps=1, max_reps=1, target_phase_s=0.0
    )
    if once.median_ms > FAR_PAST_WINDOW * config.max_ms:
        return once.median_ms
    phase = time_phase(
        call, rotate([inputs]), clock, flush, config.device, warmup_reps=1, min_reps=3, max_reps=10, target_phase_s=0.3
    )
    return phase.median_ms


def _check_compile(model: Any, inputs: list[Any], eager: list[Any], result: FilterResult) -> bool:
    import torch

    torch._dynamo.reset()  # a long-lived worker must not accumulate compiled graphs across problems
    start = time.perf_counter()
    try:
        compiled = _forward(torch.compile(model), inputs, 0)
    except Exception as exc:  # the filter's verdict, not our failure
        result.detail = f"torch.compile: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
        return False
    result.compile_first_s = time.perf_counter() - start
    result.compile_matches = len(compiled) == len(eager) and all(
        c.shape == e.shape and (not e.is_floating_point() or torch.allclose(c, e, rtol=1e-2, atol=1e-2, equal_nan=True))
        for c, e in zip(compiled, eager, strict=False)
    )
    return True


def run_filters(
    index: int, code: str, config: FilterConfig, clock: Any, flush: Any, on_wait: Callable[[bool], None] | None = None
) -> FilterResult:
    """Apply the four filters to one problem's source (executes it: call only in a worker process).

    `on_wait(True/False)` marks the start and end of each wait for a GPU turn (gpu_turns.py)."""
    from cuda_agent.gpu_turns import GpuTurns, NoTurns

    turns = GpuTurns(config.turns_dir, on_wait) if config.turns_dir else NoTurns()
    start = time.perf_counter()
    result = _run_filters(FilterResult(index=index), code, config, clock, flush, turns)
    result.wall_s, result.turn_wait_s = time.perf_counter() - start, turns.waited_s
    return result


def _run_filters(
    result: FilterResult, code: str, config: FilterConfig, clock: Any, flush: Any, turns: Any
) -> FilterResult:
    import torch

    from cuda_agent.errors import TaskError
    from cuda_agent.tasks.problem import call_inputs, draw_inputs, load_problem

    index = result.index
    name = f"synth_{index}.py"
    start = time.perf_counter()
    try:
        problem = load_problem(code, name)
        torch.manual_seed(0)
        model = problem.Model(*call_inputs(problem, name, "get_init_inputs"))
        # Every kernel but a timing's runs in a shared turn, input draws and comparisons too: any of them
        # beside another worker's timing would be in its measurement.
        with turns.shared():
            model = model.to(config.device)
            first = draw_inputs(problem, name, 1, config.device)
            eager = _forward(model, first, 0, config.device)
    except (TaskError, Exception) as exc:  # a problem that does not run fails filter 1; that is data
        if out_of_memory(exc):
            result.reason, result.detail = OUT_OF_MEMORY, f"runs_eager: {type(exc).__name__}: {exc}"[:300]
            return result
        result.checks["runs_eager"] = False
        result.reason, result.detail = "runs_eager", f"{type(exc).__name__}: {exc}"[:300]
        return result
    finally:
        result.stage_s["runs_eager"] = time.perf_counter() - start
    result.checks["runs_eager"] = bool(eager)
    result.output_shape = list(eager[0].shape) if eager else None

    def deterministic() -> bool:
        if _STOCHASTIC.search(forward_source(code)):
            return False
        with turns.shared():
            return _equal(eager, _forward(model, first, 1, config.device))

    def input_dependent() -> bool:
        with turns.shared():
            if _constant(eager):
                return False
            return not _equal(eager, _forward(model, _second(problem, name, config), 0, config.device))

    def timed() -> float:
        with turns.exclusive():
            return _time_eager(model, first, config, clock, flush)

    # The compiled call is not in a turn: its first call is mostly compiling, on the CPU, and a turn that
    # long would hold every timer, and so every worker, back.
    stages = [
        ("deterministic", deterministic),
        ("input_dependent", input_dependent),
        ("time_window", lambda: _in_window(result, timed(), config)),
        ("runs_compile", lambda: _check_compile(model, first, eager, result)),
    ]
    if not config.compile:
        stages.pop()
    for filter_name, check in stages:
        start = time.perf_counter()
        try:
            result.checks[filter_name] = bool(check())
        except Exception as exc:  # e.g. a second input draw that fails: the filter fails
            if out_of_memory(exc):
                result.reason, result.detail = OUT_OF_MEMORY, f"{filter_name}: {type(exc).__name__}: {exc}"[:300]
                return result
            result.checks[filter_name] = False
            result.detail = f"{filter_name}: {type(exc).__name__}: {exc}"[:300]
        result.stage_s[filter_name] = time.perf_counter() - start
        if not result.checks[filter_name] and result.reason is None:
            result.reason = filter_name
            if config.short_circuit:
                return result
    result.passed = result.reason is None and result.checks["runs_eager"]
    result.reason = result.reason or (None if result.passed else "runs_eager")
    return result


def _second(problem: Any, name: str, config: FilterConfig) -> list[Any]:
    from cuda_agent.tasks.problem import draw_inputs

    return draw_inputs(problem, name, 2, config.device)


def _in_window(result: FilterResult, eager_ms: float, config: FilterConfig) -> bool:
    result.eager_ms = eager_ms
    return config.min_ms <= eager_ms <= config.max_ms
