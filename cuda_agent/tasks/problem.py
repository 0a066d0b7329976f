"""Execute a problem file's source into a module and check that it has the KernelBench shape.

This runs the task's code: call it only inside a child process (see `inspection.py` and the
judge's workers), never in a grader or CLI process.
"""

from __future__ import annotations

import sys
import types

from cuda_agent.errors import TaskError

REQUIRED = ("Model", "get_inputs", "get_init_inputs")


def load_problem(
    code: str, filename: str, module_name: str = "cuda_agent_problem", register: bool = True
) -> types.ModuleType:
    """Compile and execute `code` as a fresh module and check it defines Model, get_inputs, get_init_inputs.

    Raises:
        TaskError: a one-line message naming the file and the cause.
    """
    try:
        compiled = compile(code, filename, "exec")
    except SyntaxError as exc:
        raise TaskError(f"{filename}: syntax error at line {exc.lineno}: {exc.msg}") from None
    module = types.ModuleType(module_name)
    module.__file__ = filename
    # Registered before exec so that dataclasses and pickling inside the problem can find it; the
    # judge's candidate process opts out, so candidate code cannot reach the reference by name.
    if register:
        sys.modules[module_name] = module
    try:
        exec(compiled, module.__dict__)
    except Exception as exc:
        raise TaskError(f"{filename}: executing the problem raised {type(exc).__name__}: {exc}") from None
    missing = [name for name in REQUIRED if not callable(getattr(module, name, None))]
    if missing:
        raise TaskError(f"{filename}: missing {', '.join(missing)} (a problem defines {', '.join(REQUIRED)})")
    return module


def call_inputs(module: types.ModuleType, filename: str, which: str) -> list:
    """Call `get_inputs` or `get_init_inputs` and return its result as a list.

    Raises:
        TaskError: the function raised or returned something that is not a list or tuple.
    """
    try:
        value = getattr(module, which)()
    except Exception as exc:
        raise TaskError(f"{filename}: {which}() raised {type(exc).__name__}: {exc}") from None
    if not isinstance(value, list | tuple):
        raise TaskError(f"{filename}: {which}() returned {type(value).__name__}, expected a list")
    return list(value)


def draw_inputs(module: types.ModuleType, filename: str, seed: int, device: str) -> list:
    """Seed torch, call get_inputs() and move its tensors to `device` (new values, new allocations).

    get_inputs() runs with `device` as torch's default device, so `torch.rand(...)` draws directly
    on the GPU: drawing KernelBench's multi-GB inputs on the CPU takes seconds per trial. Values
    then differ from a CPU draw under the same seed, but are the same for every party in a run.
    """
    import torch

    torch.manual_seed(seed)
    with torch.device(device):
        values = call_inputs(module, filename, "get_inputs")
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]
