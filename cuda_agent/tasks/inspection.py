"""Inspect a task by running its code once in a child process.

The parent (`inspect_task`) never executes the problem's code; the child
(`python -m cuda_agent.tasks.inspection REQUEST RESULT`) loads it, builds the model, runs a
forward pass and writes what it saw as JSON to RESULT.

Memory: KernelBench holds problems whose inputs alone take tens of GiB (level 1's ReLU: two 6 GiB
draws and three 6 GiB outputs). The child caps its own address space (RLIMIT_AS, CPU only: CUDA maps
far more than it uses) below the memory this machine has free, first sizes the problem on torch's
meta device (shapes only, no memory) and refuses at once when it cannot fit, and otherwise fails
by itself at the cap, so the kernel's OOM killer, which may pick other processes, never has to act.
"""

from __future__ import annotations

import json
import re
import resource
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent.errors import TaskError
from cuda_agent.subproc import child_env, run_module
from cuda_agent.types import Task, TaskInspection, TensorSpec

GIB = 2**30
HEADROOM = 0.9
"""Share of the free memory the child may map: the rest stays for everything else on the machine."""


@dataclass(frozen=True)
class Memory:
    """This machine's memory in bytes (/proc/meminfo), and the cap an inspection runs under."""

    total: int
    available: int

    @property
    def cap(self) -> int:
        return int(self.available * HEADROOM)

    def describe(self) -> str:
        return (
            f"this machine has {self.total / GIB:.1f} GiB, {self.available / GIB:.1f} GiB free "
            f"(the inspection may use {self.cap / GIB:.1f} GiB)"
        )


def machine_memory() -> Memory:
    """Total and available memory, from /proc/meminfo (Linux)."""
    fields = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        name, _, value = line.partition(":")
        fields[name] = int(value.split()[0]) * 1024
    return Memory(total=fields["MemTotal"], available=fields.get("MemAvailable", fields["MemFree"]))


def inspect_task(task: Task, device: str = "cpu", timeout_s: float = 300.0) -> TaskInspection:
    """Run the task once in a child process and report shapes, dtypes, parameters and determinism.

    Args:
        task: the problem to inspect.
        device: 'cpu' or 'cuda'.
        timeout_s: limit for the whole child, import of torch included.

    Raises:
        TaskError: the problem is broken or does not fit in memory (one line naming the file and the cause,
            what the machine has and what to do), or the child died.
    """
    memory = machine_memory()
    with tempfile.TemporaryDirectory(prefix="cuda-agent-inspect-") as tmp:
        request, result = Path(tmp) / "request.json", Path(tmp) / "result.json"
        payload = {"code": task.code, "filename": _filename(task), "device": device, "memory": memory.__dict__}
        request.write_text(json.dumps(payload))
        child = run_module(__name__, [str(request), str(result)], timeout_s=timeout_s, env=child_env())
        if child.timed_out:
            raise TaskError(f"{_filename(task)}: inspection did not finish within {timeout_s:.0f} s")
        if not result.exists():
            tail = (child.stderr.strip().splitlines() or ["no output"])[-1]
            killed = f" (killed: out of memory? {memory.describe()})" if child.returncode == -9 else ""
            raise TaskError(f"{_filename(task)}: inspection process died (exit {child.returncode}){killed}: {tail}")
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


def tensor_bytes(values: Any) -> int:
    """Bytes held by the tensors in `values` (a tensor, or nested lists and tuples of them)."""
    import torch

    return sum(v.numel() * v.element_size() for v in flatten_outputs(values) if isinstance(v, torch.Tensor))


def meta_estimate(module: Any, filename: str) -> int | None:
    """Bytes the inspection holds at once, sized on the meta device (no memory used): two input draws, the
    parameters and three outputs. None when the problem does not run on meta tensors (then the cap decides)."""
    import torch

    from cuda_agent.tasks.problem import call_inputs

    try:
        with torch.device("meta"), torch.no_grad():
            model = module.Model(*call_inputs(module, filename, "get_init_inputs"))
            inputs = call_inputs(module, filename, "get_inputs")
            outputs = flatten_outputs(model(*inputs))
    except Exception:  # many operators have no meta kernel; the cap still bounds the real run
        return None
    parameters = sum(p.numel() * p.element_size() for p in model.parameters())
    return 2 * tensor_bytes(inputs) + parameters + 3 * tensor_bytes(outputs)


def _too_big(filename: str, needed: str, memory: Memory, device: str) -> TaskError:
    where = "a GPU with that much memory" if device == "cuda" else "a machine with that much free memory"
    return TaskError(
        f"{filename}: needs {needed}; {memory.describe()}. Inspect it on {where}"
        + (", or with --device cuda on a GPU that has it" if device == "cpu" else "")
    )


_ALLOCATION = re.compile(r"tried to allocate (\d+) bytes")


def _inspect(code: str, filename: str, device: str, memory: Memory) -> dict:
    from cuda_agent.tasks.problem import load_problem

    module = load_problem(code, filename)
    estimate = meta_estimate(module, filename)
    if estimate is not None and device == "cpu" and estimate > memory.cap:
        raise _too_big(filename, f"about {estimate / GIB:.1f} GiB (inputs drawn twice, three outputs)", memory, device)
    try:
        return _run(module, filename, device)
    except MemoryError:
        raise _too_big(filename, "more memory than the cap", memory, device) from None
    except TaskError as exc:
        failed = _ALLOCATION.search(str(exc))
        if failed is None and "out of memory" not in str(exc).lower():
            raise
        size = f"more than the cap (one allocation of {int(failed.group(1)) / GIB:.1f} GiB failed)" if failed else ""
        raise _too_big(filename, size or "more memory than the device has", memory, device) from None


def _run(module: Any, filename: str, device: str) -> dict:
    import torch

    from cuda_agent.tasks.problem import call_inputs, draw_inputs

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
    memory = Memory(**request["memory"])
    if request["device"] == "cpu":
        # Before torch is imported: every mapping of this process counts against the cap from here on.
        resource.setrlimit(resource.RLIMIT_AS, (memory.cap, memory.cap))
    try:
        payload = _inspect(request["code"], request["filename"], request["device"], memory)
    except TaskError as exc:
        payload = {"error": str(exc)}
    result_path.write_text(json.dumps(payload))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
