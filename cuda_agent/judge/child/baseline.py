"""Eager and `torch.compile` baseline timings of a reference, measured in their own process.

`python -m cuda_agent.judge.child.baseline REQUEST.json RESULT.json` times the reference with the same
protocol (`timing.py`) and flags as the candidate. The grader caches results on disk, keyed by
everything that changes a time: task source, device name, torch and CUDA versions, precision
flags, compile mode and protocol version; a second judgement of a task re-times nothing.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cuda_agent.judge.protocol import BaselineRequest, BaselineResult


def cache_key(task_code: str, device_name: str, env: dict[str, Any], flags: dict[str, Any], mode: str | None) -> str:
    """Hex key of one baseline measurement (`env`: torch, cuda, protocol_version, and cpu_threads for a CPU's)."""
    facts = {
        "task": hashlib.sha256(task_code.encode()).hexdigest(),
        "device": device_name,
        "torch": env.get("torch"),
        "cuda": env.get("cuda"),
        "protocol": env.get("protocol_version"),
        "flags": flags,
        "compile_mode": mode,
    }
    if env.get("cpu_threads") is not None:  # a CPU timing depends on its threads; GPU keys stay as they were
        facts["cpu_threads"] = env["cpu_threads"]
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:32]


@contextmanager
def _timing_lock(path: str | None) -> Iterator[None]:
    """Hold `path` exclusively (flock) for the block; nothing when `path` is None."""
    if path is None:
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _time_model(model: Any, problem: Any, req: BaselineRequest, clock: Any, flush: Any) -> dict[str, Any]:
    import torch

    from cuda_agent.judge.child.inputs import timing_input_sets
    from cuda_agent.judge.child.timing import time_phase

    input_sets = timing_input_sets(problem, req.task_name, req.timing_seed, req.device)

    def call(inputs: list[Any]) -> Any:
        with torch.no_grad():
            return model(*inputs)

    call(input_sets[0])  # the first call builds and autotunes; keep it out of the warm-up count
    with _timing_lock(req.timing_lock):
        phase = time_phase(
            call,
            input_sets,
            clock,
            flush,
            req.device,
            warmup_reps=req.warmup_reps,
            min_reps=req.min_reps,
            max_reps=req.max_reps,
            target_phase_s=req.target_phase_s,
        )
    return phase.summary()


def run(req: BaselineRequest) -> BaselineResult:
    import torch

    from cuda_agent.judge import env
    from cuda_agent.judge.child.guards import PersistingL2
    from cuda_agent.judge.child.timing import Clock, make_flusher
    from cuda_agent.tasks.problem import call_inputs, load_problem

    flags = env.apply_precision_flags()
    info = env.describe_device(req.device)
    problem = load_problem(req.task_code, req.task_name)
    init = call_inputs(problem, req.task_name, "get_init_inputs")
    torch.manual_seed(0)
    model = problem.Model(*init).to(req.device)
    cuda = req.device == "cuda"
    clock = Clock(time.perf_counter, torch.cuda.synchronize if cuda else None, torch.cuda.Event if cuda else None)
    l2 = PersistingL2() if cuda else None
    flush = make_flusher(req.device, info.get("l2_bytes"), l2.reset if l2 else None)
    result = BaselineResult(flags=flags, env=info)
    start = time.perf_counter()
    result.eager = _time_model(model, problem, req, clock, flush)
    result.eager["wall_s"] = time.perf_counter() - start
    start = time.perf_counter()
    try:
        compiled = torch.compile(model, mode=req.compile_mode)
        result.compile = _time_model(compiled, problem, req, clock, flush)
        result.compile["wall_s"] = time.perf_counter() - start
    except Exception as exc:  # a reference that torch.compile cannot handle: compare with eager only
        if isinstance(exc, torch.OutOfMemoryError | MemoryError):  # the machine's memory, not the reference:
            raise  # our failure (main reports it, the judge raises JudgeInfraError); never cached as compile_error
        result.compile_error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500]
    return result


def main(argv: list[str]) -> int:
    from cuda_agent.errors import TaskError

    req = BaselineRequest.model_validate_json(Path(argv[0]).read_text())
    try:
        result = run(req)
    except TaskError as exc:
        result = BaselineResult(error=str(exc))
    except Exception as exc:
        result = BaselineResult(error=f"reference failed while timed: {type(exc).__name__}: {exc}")
    Path(argv[1]).write_text(result.model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
