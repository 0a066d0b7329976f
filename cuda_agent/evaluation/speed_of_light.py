"""Speed of light per task: the least time any kernel could take on a device.

bound = max(minimum bytes / copy bandwidth, FLOPs / FP32 matmul rate), where the minimum bytes are
the inputs, outputs, parameters and buffers each read or written once, and the FLOPs are what
`torch.utils.flop_counter.FlopCounterMode` counts over the reference's forward (matmuls,
convolutions, attention: elementwise work counts zero, so the compute term is itself a lower bound).
Each solution's and baseline's fraction of it is bound / measured time (1.0 = at the speed of light).

The shapes come from running the reference on the meta device (no memory, no compute, any size),
or, for the few ops without meta kernels, on small enough real CPU tensors; both run in a child
process (`python -m cuda_agent.evaluation.speed_of_light REQUEST RESULT`): the grader never runs
task code. Figures are cached per task source under the judge's cache folder.

Ceilings: on the H200 the copy bandwidth measured on our machine (4.3 TB/s, DESIGN.md section 5)
and NVIDIA's H200 SXM datasheet FP32 figure (67 TFLOP/s without tensor cores: the judge keeps TF32
off, so fp32 tasks cannot use them); elsewhere both are measured at run time in a child process
(one thread on a CPU, as the judge times with one thread).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cuda_agent.errors import TaskError
from cuda_agent.evaluation.records import Ceilings, SpeedOfLight
from cuda_agent.subproc import child_env, run_module
from cuda_agent.types import Task

H200 = Ceilings(
    device="NVIDIA H200",
    copy_bytes_per_s=4.3e12,
    flops_per_s=67e12,
    source="copy 4.3 TB/s measured on our H200 (DESIGN.md section 5); FP32 67 TFLOP/s: NVIDIA H200 SXM datasheet",
)
REAL_RUN_LIMIT_BYTES = 512 * 2**20
"""Above this the fallback real CPU run is skipped: the bound is reported as unknown instead."""


def estimate(tasks: list[Task], cache_dir: Path, timeout_per_task_s: float = 60.0) -> dict[str, SpeedOfLight]:
    """Bytes and FLOPs of each task, by ref (cached by source); no bound yet (see `with_bound`).

    One child process handles every uncached task (importing torch once costs seconds); it writes one
    line per task as it goes, so a task that hangs past the time limit loses only itself and those after it.
    """
    folder = cache_dir / "speed_of_light"
    found = {t.ref: folder / f"{t.code_hash}.json" for t in tasks}
    todo = [t for t in tasks if not found[t.ref].exists()]
    if todo:
        request = {"kind": "estimate", "tasks": [{"ref": t.ref, "code": t.code, "name": t.name} for t in todo]}
        lines = _child(request, 60.0 + timeout_per_task_s * len(todo)).splitlines()
        folder.mkdir(parents=True, exist_ok=True)
        for line in lines:
            row = json.loads(line)
            found[row.pop("ref")].write_text(SpeedOfLight.model_validate(row).model_dump_json())
    return {
        ref: SpeedOfLight.model_validate_json(path.read_text())
        if path.exists()
        else SpeedOfLight(how="unknown: timed out")
        for ref, path in found.items()
    }


def with_bound(sol: SpeedOfLight, ceilings: Ceilings) -> SpeedOfLight:
    """The estimate with its bound under `ceilings`."""
    if sol.bytes_moved is None:
        return sol
    memory_ms = sol.bytes_moved / ceilings.copy_bytes_per_s * 1e3
    compute_ms = (sol.flops or 0) / ceilings.flops_per_s * 1e3
    limited_by = "compute" if compute_ms > memory_ms else "memory"
    return sol.model_copy(update={"bound_ms": max(memory_ms, compute_ms), "limited_by": limited_by})


def fraction(bound_ms: float | None, measured_ms: float | None) -> float | None:
    """Share of the speed of light reached: bound / measured (1.0 at the bound)."""
    return bound_ms / measured_ms if bound_ms and measured_ms else None


def device_ceilings(device: str, device_name: str, timeout_s: float = 120.0) -> Ceilings:
    """Documented ceilings for the H200; measured ones for anything else (a CPU, another GPU)."""
    if device == "cuda" and "H200" in device_name:
        return H200
    return Ceilings.model_validate_json(_child({"kind": "ceilings", "device": device}, timeout_s))


def _child(request: dict[str, Any], timeout_s: float) -> str:
    """Run this module's child on `request`; the text it wrote (JSON, or JSON lines)."""
    with tempfile.TemporaryDirectory(prefix="cuda-agent-sol-") as tmp:
        req, res = Path(tmp) / "request.json", Path(tmp) / "result.json"
        req.write_text(json.dumps(request))
        env = child_env({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
        if request.get("device") != "cuda":
            env["CUDA_VISIBLE_DEVICES"] = ""
        child = run_module(__name__, [str(req), str(res)], timeout_s=timeout_s, env=env)
        if not res.exists() or (child.returncode != 0 and request["kind"] != "estimate"):
            tail = (child.stderr.strip().splitlines() or ["no output"])[-1]
            raise TaskError(
                f"speed-of-light child failed (exit {child.returncode}, timed out {child.timed_out}): {tail}"
            )
        return res.read_text()


# ---- the child process -------------------------------------------------------------------------


def _nbytes(values: Any) -> int:
    import torch

    from cuda_agent.tasks.inspection import flatten_outputs

    return sum(v.numel() * v.element_size() for v in flatten_outputs(values) if isinstance(v, torch.Tensor))


def _count(code: str, name: str, device: str) -> dict[str, Any]:
    """Bytes and FLOPs of one forward with tensors on `device` ('meta' or 'cpu')."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from cuda_agent.tasks.problem import call_inputs, load_problem

    problem = load_problem(code, name)
    torch.manual_seed(0)
    with torch.device(device):
        init = call_inputs(problem, name, "get_init_inputs")
        model = problem.Model(*init)
        inputs = call_inputs(problem, name, "get_inputs")
    inputs = [v.to(device) if isinstance(v, torch.Tensor) else v for v in inputs]
    if device != "meta" and _nbytes(inputs) > REAL_RUN_LIMIT_BYTES:
        raise MemoryError("inputs too large for a real CPU run")
    weights = [*model.parameters(), *model.buffers()]
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        outputs = model(*inputs)
    total = _nbytes(inputs) + _nbytes(outputs) + _nbytes(weights)
    return {"bytes_moved": int(total), "flops": int(counter.get_total_flops()), "how": device}


def _estimate(request: dict[str, Any]) -> dict[str, Any]:
    errors = []
    for device in ("meta", "cpu"):
        try:
            return _count(request["code"], request["name"], device)
        except Exception as exc:  # an op without a meta kernel, or a reference too large to run for real
            errors.append(f"{device}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200])
    return {"how": "unknown: " + "; ".join(errors)}


def _measure(device: str) -> dict[str, Any]:
    """Copy bandwidth (64 MiB tensors) and FP32 matmul rate (2048^2, TF32 off), best of a few runs."""
    import torch

    torch.set_num_threads(1)
    torch.backends.cuda.matmul.allow_tf32 = False
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def best_s(fn: Any, reps: int) -> float:
        fn()
        sync()
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - start)
        return min(times)

    src = torch.ones(16 * 2**20, device=device)
    dst = torch.empty_like(src)
    copy_s = best_s(lambda: dst.copy_(src), 5)
    n = 2048 if device == "cuda" else 768
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    mm_s = best_s(lambda: a @ b, 5)
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    return {
        "device": name,
        "copy_bytes_per_s": 2 * src.numel() * 4 / copy_s,
        "flops_per_s": 2 * n**3 / mm_s,
        "source": f"measured at run time: copy of 64 MiB fp32, {n}x{n} fp32 matmul, best of 5, one thread on a CPU",
    }


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[0]).read_text())
    out = Path(argv[1])
    if request["kind"] == "ceilings":
        out.write_text(json.dumps(_measure(request["device"])))
        return 0
    out.touch()
    for task in request["tasks"]:
        row = {"ref": task["ref"], **_estimate(task)}
        with out.open("a") as f:  # one line per task as it finishes: a kill later loses only the rest
            f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
