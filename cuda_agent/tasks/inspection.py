"""Inspect a task by running its code once in a child process.

The parent (`inspect_task`) never executes the problem's code; the child
(`python -m cuda_agent.tasks.inspection REQUEST RESULT`) loads it, builds the model, runs a
forward pass and writes what it saw as JSON to RESULT.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cuda_agent.errors import TaskError
from cuda_agent.subproc import child_env, run_module
from cuda_agent.types import Task, TaskInspection, TensorSpec


def inspect_task(task: Task, device: str = "cpu", timeout_s: float = 300.0) -> TaskInspection:
    """Run the task once in a child process and report shapes, dtypes, parameters and determinism.

    Args:
        task: the problem to inspect.
        device: 'cpu' or 'cuda'.
        timeout_s: limit for the whole child, import of torch included.

    Raises:
        TaskError: the problem is broken (one line naming the file and the cause) or the child died.
    """
    with tempfile.TemporaryDirectory(prefix="cuda-agent-inspect-") as tmp:
        request, result = Path(tmp) / "request.json", Path(tmp) / "result.json"
        request.write_text(json.dumps({"code": task.code, "filename": _filename(task), "device": device}))
        child = run_module(__name__, [str(request), str(result)], timeout_s=timeout_s, env=child_env())
        if child.timed_out:
            raise TaskError(f"{_filename(task)}: inspection did not finish within {timeout_s:.0f} s")
        if not result.exists():
            tail = (child.stderr.strip().splitlines() or ["no output"])[-1]
            raise TaskError(f"{_filename(task)}: inspection process died (exit {child.returncode}): {tail}")
        payload = json.loads(result.read_text())
    if "error" in payload:
        raise TaskError(payload["error"])
    return TaskInspection.model_validate(payload)


def _filename(task: Task) -> str:
    return task.ref if task.ref.endswith(".py") else f"{task.ref} ({task.name})"


def spec_of(value: Any) -> TensorSpec:
    """Describe a value: shape and dtype for tensors, a short repr otherwise."""
    import torch

    if isinstance(value, torch.Tensor):
        return TensorSpec(kind="tensor", shape=list(value.shape), dtype=str(value.dtype))
    return TensorSpec(kind="value", repr=repr(value)[:80])


def flatten_outputs(value: Any) -> list[Any]:
    """A forward's result as a flat list (a tensor, or a tuple/list of them)."""
    if isinstance(value, list | tuple):
        return [item for v in value for item in flatten_outputs(v)]
    return [value]


def _forward(model: Any, inputs: list) -> tuple[list, float]:
    import torch

    with torch.no_grad():
        start = time.perf_counter()
        out = flatten_outputs(model(*inputs))
        if any(isinstance(o, torch.Tensor) and o.is_cuda for o in out):
            torch.cuda.synchronize()
        return out, (time.perf_counter() - start) * 1e3


def _same(a: list, b: list) -> bool:
    import torch

    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or not torch.equal(x.nan_to_num(), y.nan_to_num()):
                return False
        elif x != y:
            return False
    return True


def _inspect(code: str, filename: str, device: str) -> dict:
    import torch

    from cuda_agent.tasks.problem import call_inputs, draw_inputs, load_problem

    module = load_problem(code, filename)
    init = call_inputs(module, filename, "get_init_inputs")
    try:
        torch.manual_seed(0)
        model = module.Model(*init).to(device)
    except Exception as exc:
        raise TaskError(f"{filename}: Model(*get_init_inputs()) raised {type(exc).__name__}: {exc}") from None
    inputs = draw_inputs(module, filename, seed=1, device=device)
    other_inputs = draw_inputs(module, filename, seed=2, device=device)
    try:
        # No reseeding between the two calls on the same inputs: a stochastic op shows as a difference.
        first, _ = _forward(model, inputs)
        second, forward_ms = _forward(model, inputs)
        other, _ = _forward(model, other_inputs)
    except Exception as exc:
        raise TaskError(f"{filename}: Model.forward raised {type(exc).__name__}: {exc}") from None
    return TaskInspection(
        init_inputs=[spec_of(v) for v in init],
        inputs=[spec_of(v) for v in inputs],
        outputs=[spec_of(v) for v in first],
        parameter_count=sum(p.numel() for p in model.parameters()),
        deterministic=_same(first, second),
        input_dependent=not _same(first, other),
        forward_ms=forward_ms,
        device=torch.cuda.get_device_name() if device == "cuda" else "cpu",
    ).model_dump()


def main(argv: list[str]) -> int:
    request_path, result_path = Path(argv[0]), Path(argv[1])
    request = json.loads(request_path.read_text())
    try:
        payload = _inspect(request["code"], request["filename"], request["device"])
    except TaskError as exc:
        payload = {"error": str(exc)}
    result_path.write_text(json.dumps(payload))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
