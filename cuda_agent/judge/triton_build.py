"""A Triton workspace's compile step: every kernel that forward launches, compiled for the GPU, none of them run.

`compile_triton(task, folder, device)` is what `bash utils/compile.sh` runs in a Triton workspace
(sandbox/workspace_commands.py) after the judge's static rules. Triton compiles a kernel at its first launch, for
the arguments of that launch; so a child process (`python -P -m cuda_agent.judge.triton_build REQUEST RESULT`)
builds ModelNew and calls forward once on the task's inputs with every launch turned into a compile alone: on a GPU
a launch compiles for that GPU without launching (`warmup`), on the CPU (`TRITON_INTERPRET=1`) each interpreted
kernel is compiled for the H100/H200's sm_90 by Triton's own LLVM and ptxas, which need no GPU
(child/triton_compile.py), and not interpreted. Forward goes on with outputs its kernels never wrote, so host code
that reads them sees garbage; a compile failure is reported with the compiler's message, as nvcc's are.

What this does not protect against: the child runs the agent's code as the agent's own user, unconfined, and the
agent reads its report; nothing of it is a verdict or a reward (`python -m utils.verification` judges).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.machine import detect_device
from cuda_agent.subproc import child_env, run_module
from cuda_agent.types import Task

COMPILE_TIMEOUT_S = 300.0
"""The child's limit: a KernelBench forward's launches compile in seconds; its inputs take longest on the CPU."""


class TritonBuildResult(BaseModel):
    """How compiling a Triton solution's kernels went."""

    model_config = ConfigDict(extra="forbid")

    status: str = Field(description="'ok', 'compile_error' (the compiler refused a kernel), 'failed' or 'timeout'.")
    message: str = Field(default="", description="The compiler's message, or what else failed, in a few lines.")
    kernels: list[str] = Field(default_factory=list, description="The kernels forward launched, once each, in order.")
    target: str = Field(default="", description="What they were compiled for: the GPU's arch, or sm_90 on the CPU.")
    wall_s: float = 0.0


def compile_triton(task: Task, solution: Path, device: str, timeout_s: float = COMPILE_TIMEOUT_S) -> TritonBuildResult:
    """Compile every kernel that forward launches for `task`'s inputs, in a child process (module docstring).

    Args:
        task: the problem (its Model, get_inputs, get_init_inputs).
        solution: the Python file that defines ModelNew (a Triton workspace's model_new.py).
        device: 'cuda' (compiled for this GPU; for sm_90 where none is visible) or 'cpu' (for sm_90).
    """
    if device == "cuda" and detect_device("auto") != "cuda":
        device = "cpu"  # no GPU beside the agent (the sandbox service's GPUs judge): compiled for sm_90 all the same
    with tempfile.TemporaryDirectory(prefix="cuda_agent_triton_build_") as folder:
        request, result = Path(folder) / "request.json", Path(folder) / "result.json"
        payload = {"task_code": task.code, "task_name": task.name, "solution": str(Path(solution).resolve())}
        request.write_text(json.dumps({**payload, "device": device}))
        env = child_env({"TRITON_CACHE_DIR": str(Path(folder) / "cache"), "TRITON_HOME": folder})
        if device == "cpu":
            env["TRITON_INTERPRET"] = "1"
        else:
            env.pop("TRITON_INTERPRET", None)
        start = time.monotonic()
        child = run_module(__name__, [str(request), str(result)], timeout_s, cwd=Path(solution).parent, env=env)
        wall_s = time.monotonic() - start
        if child.timed_out:
            return TritonBuildResult(status="timeout", message=f"exceeded {timeout_s:.0f} s", wall_s=wall_s)
        if not result.exists():
            tail = "\n".join(child.stderr.strip().splitlines()[-8:])
            return TritonBuildResult(status="failed", message=f"exit {child.returncode}: {tail}", wall_s=wall_s)
        return TritonBuildResult.model_validate({**json.loads(result.read_text()), "wall_s": wall_s})


def _compile_only(device: str) -> list[str]:
    """Turn every launch into a compile alone; returns the launched kernels' names, filled as they launch."""
    from triton.runtime import autotuner, interpreter, jit

    from cuda_agent.judge.child.triton_compile import AheadCompiler, mark_compiles
    from cuda_agent.judge.child.triton_launch import wall_bench

    mark_compiles()
    launched: list[str] = []
    ahead = AheadCompiler() if device == "cpu" else None
    compile_on_gpu = jit.JITFunction.run

    def on_gpu(kernel: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        if kernel.__name__ not in launched:
            launched.append(kernel.__name__)
        return compile_on_gpu(kernel, *args, grid=grid, warmup=True, **kwargs)

    def on_cpu(kernel: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> None:
        if kernel.__name__ not in launched:
            launched.append(kernel.__name__)
        ahead.compile(kernel, args, kwargs)

    jit.JITFunction.run = on_gpu
    interpreter.InterpretedFunction.run = on_cpu
    if ahead is not None:  # autotune's benchmarker needs a GPU driver; its timings of compiles mean nothing anyway
        autotuner.Autotuner.do_bench = property(lambda tuner: wall_bench)
    return launched


def _build(request: dict[str, Any]) -> TritonBuildResult:
    """In the child: ModelNew on the task's inputs, forward called once with launches that only compile."""
    import importlib.util

    import torch

    from cuda_agent.judge.child.inputs import make_inputs
    from cuda_agent.judge.child.triton_compile import TARGET, compile_failure
    from cuda_agent.tasks.problem import call_inputs, load_problem

    device, name = request["device"], request["task_name"]
    problem = load_problem(request["task_code"], name, module_name="_task", register=False)
    torch.manual_seed(0)
    init_args = call_inputs(problem, name, "get_init_inputs")
    launched = _compile_only(device)
    target = f"sm_{TARGET[1]} (no GPU here)" if device == "cpu" else torch.cuda.get_device_name()
    stage = "importing model_new.py"
    try:
        spec = importlib.util.spec_from_file_location("model_new", request["solution"])
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        stage = "ModelNew(*get_init_inputs())"
        model = module.ModelNew(*init_args).to(device)
        inputs = make_inputs(problem, name, 0, device)
        stage = "forward"
        with torch.no_grad():
            model(*inputs)
    except Exception as exc:
        message = compile_failure(exc)
        status = "failed" if message is None else "compile_error"
        message = message or f"{stage} raised {type(exc).__name__}: {exc}"
        return TritonBuildResult(status=status, message=message[:4000], kernels=launched, target=target)
    return TritonBuildResult(status="ok", kernels=launched, target=target)


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[0]).read_text())
    result = _build(request)
    Path(argv[1]).write_text(result.model_dump_json())
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # no teardown: the agent's atexit hooks have no say in the result
