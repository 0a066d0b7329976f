"""Eager and `torch.compile` baseline timings of a reference, measured in their own process.

`python -m cuda_agent.judge.child.baseline REQUEST.json RESULT.json` times the reference with the same
protocol (`timing.py`) and flags as the candidate: in groups of as many calls after each cache flush as the
candidate's requests carried, each call on an input set of its own. The grader caches results on disk, keyed by
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
from cuda_agent.subproc import read_record


def cache_key(task_code: str, device_name: str, env: dict[str, Any], flags: dict[str, Any], mode: str | None) -> str:
    """Hex key of one baseline measurement (`env`: torch, cuda, protocol_version, max_group_calls, and cpu_threads
    for a CPU's)."""
    facts = {
        "task": hashlib.sha256(task_code.encode()).hexdigest(),
        "device": device_name,
        "torch": env.get("torch"),
        "cuda": env.get("cuda"),
        "protocol": env.get("protocol_version"),
        "flags": flags,
        "compile_mode": mode,
    }
    if env.get("max_group_calls") is not None:  # a cap on the calls per group changes what a time holds
        facts["max_group_calls"] = env["max_group_calls"]
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


def _time_model(model: Any, problem: Any, req: BaselineRequest, clock: Any, flush: Any, group: int) -> dict[str, Any]:
    import torch

    from cuda_agent.judge.child.inputs import timing_input_sets
    from cuda_agent.judge.child.kernel_time import kernel_summary, kernel_times_ms
    from cuda_agent.judge.child.timing import PhaseBudget, rotate, time_phase

    input_sets = timing_input_sets(problem, req.task_name, req.timing_seed, req.device, group)

    def call(inputs: list[Any]) -> Any:
        with torch.no_grad():
            return model(*inputs)

    call(input_sets[0])  # out of the warm-up count: lazy per-input set-up (the build itself ran in `_warm`)
    with _timing_lock(req.timing_lock):
        phase = time_phase(
            call,
            rotate(input_sets),
            clock,
            flush,
            req.device,
            warmup_reps=req.warmup_reps,
            min_reps=req.min_reps,
            max_reps=req.max_reps,
            target_phase_s=req.target_phase_s,
            budget=PhaseBudget(req.ci_width, req.max_phase_s),
            group=group,
        )
        sync = clock.synchronize or (lambda: None)
        kernel = kernel_summary(kernel_times_ms(lambda: call(input_sets[0]), req.device, sync))
    return phase.summary() | {"kernel": kernel, "calls_per_group": group}


NOMINAL_NOISE_MS = {"cpu": 0.5, "cuda": 0.2}
"""The outside view's noise per request assumed where no candidate's run chose the calls per group (`_group_alone`):
a quiet 2-core VM's (0.26 ms measured) with room, and an H100's (0.17 ms)."""


def _group_alone(model: Any, problem: Any, req: BaselineRequest, clock: Any, flush: Any) -> int:
    """Calls per group where no run chose them (reference timings alone): `timing.group_size` from eager's time here
    and NOMINAL_NOISE_MS, as the grader chooses them from its own noise."""
    import statistics

    import torch

    from cuda_agent.judge.child.inputs import make_inputs
    from cuda_agent.judge.child.timing import group_size

    inputs = make_inputs(problem, req.task_name, req.timing_seed, req.device)
    times = []
    with torch.no_grad():
        outputs = model(*inputs)
        for _ in range(5):
            flush()
            _sync(clock)
            start = clock.perf_counter()
            outputs = model(*inputs)
            _sync(clock)
            times.append((clock.perf_counter() - start) * 1e3)
    tensors = [v for v in inputs if isinstance(v, torch.Tensor)]
    flat = outputs if isinstance(outputs, list | tuple) else [outputs]
    nbytes = sum(v.numel() * v.element_size() for v in [*tensors, *flat] if isinstance(v, torch.Tensor))
    noise = NOMINAL_NOISE_MS[req.device]
    return group_size(noise, statistics.median(times), nbytes, len(tensors), req.device, req.max_group_calls)


def _sync(clock: Any) -> None:
    if clock.synchronize is not None:
        clock.synchronize()


def _warm(model: Any, problem: Any, req: BaselineRequest) -> None:
    """One call on the first timing inputs, which are freed after: lazy set-up, and for torch.compile its tracing,
    compiling and autotuning (seconds to tens of seconds of CPU), happen here rather than in the timed turn."""
    import torch

    from cuda_agent.judge.child.inputs import make_inputs

    inputs = make_inputs(problem, req.task_name, req.timing_seed, req.device)
    with torch.no_grad():
        model(*inputs)


def _compile_failed(exc: Exception) -> str:
    """compile_error of a reference that torch.compile cannot handle; the machine's memory is ours (re-raised)."""
    import torch

    if isinstance(exc, torch.OutOfMemoryError | MemoryError):  # the machine's memory, not the reference:
        raise exc  # our failure (main reports it, the judge raises JudgeInfraError); never cached as compile_error
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500]


def _prepare(req: BaselineRequest, result: BaselineResult) -> tuple[Any, Any, Any]:
    """The reference set up and built, eager and under torch.compile (a warm call each): (problem, model, compiled
    or None). Records the flags, the device and a compile_error in `result`."""
    import torch

    from cuda_agent.judge import env
    from cuda_agent.tasks.problem import call_inputs, load_problem

    result.flags = env.apply_precision_flags()
    result.env = env.describe_device(req.device)
    result.compile_error = None
    problem = load_problem(req.task_code, req.task_name)
    init = call_inputs(problem, req.task_name, "get_init_inputs")
    torch.manual_seed(0)
    model = problem.Model(*init).to(req.device)
    _warm(model, problem, req)
    compiled = None
    try:
        compiled = torch.compile(model, mode=req.compile_mode)
        _warm(compiled, problem, req)
    except Exception as exc:  # a reference that torch.compile cannot handle: compare with eager only
        compiled, result.compile_error = None, _compile_failed(exc)
    return problem, model, compiled


def run(req: BaselineRequest) -> BaselineResult:
    import gc

    import torch

    from cuda_agent.gpu_turns import GpuTurns, NoTurns
    from cuda_agent.judge.child.guards import PersistingL2
    from cuda_agent.judge.child.timing import Clock, make_flusher

    # With `gpu_turns` this process takes its own turns on the GPU: a shared one for the set-up and torch.compile's
    # build (which took ~25 s of an exclusive turn per new task on the H100), an exclusive one for the timed
    # phases only. Inputs are freed between the two, so no working set is held while it waits.
    turns = GpuTurns(req.gpu_turns) if req.gpu_turns else NoTurns()
    cuda = req.device == "cuda"
    result = BaselineResult()
    prepared = None
    try:
        with turns.shared():
            prepared = _prepare(req, result)
            if cuda:
                torch.cuda.empty_cache()  # the warm calls' blocks go back before the wait for the exclusive turn
    except torch.OutOfMemoryError:
        # Other baselines build beside it in shared turns, each with its working set (four cold judgements at
        # KernelBench L1/19 sizes hold ~19 GB each): alone, in the exclusive turn, it fits as it did before.
        prepared = None
    clock = Clock(time.perf_counter, torch.cuda.synchronize if cuda else None, torch.cuda.Event if cuda else None)
    with turns.exclusive():
        if prepared is None:
            gc.collect()
            if cuda:
                torch.cuda.empty_cache()
            prepared = _prepare(req, result)
            result.env["built_alone"] = True  # after running out of memory in a shared turn
        problem, model, compiled = prepared
        l2 = PersistingL2() if cuda else None
        flush = make_flusher(req.device, result.env.get("l2_bytes"), l2.reset if l2 else None)
        group = result.group_calls = req.group_calls or _group_alone(model, problem, req, clock, flush)
        start = time.perf_counter()
        result.eager = _time_model(model, problem, req, clock, flush, group)
        result.eager["wall_s"] = time.perf_counter() - start
        if compiled is not None:
            start = time.perf_counter()
            try:
                result.compile = _time_model(compiled, problem, req, clock, flush, group)
                result.compile["wall_s"] = time.perf_counter() - start
            except Exception as exc:
                result.compile_error = _compile_failed(exc)
    result.gpu_held_s, result.gpu_wait_s = turns.held_s, turns.waited_s
    return result


def main(argv: list[str]) -> int:
    from cuda_agent.errors import TaskError

    req = read_record(BaselineRequest, Path(argv[0]).read_text(), "the judge's pipeline")
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
