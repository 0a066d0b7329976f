"""Eager and `torch.compile` baseline timings of a reference, measured through a shim process of ours.

`python -m cuda_agent.judge.child.baseline REQUEST.json RESULT.json` times the reference exactly as the grader times
a candidate (grader.py, timed_calls.py): a shim process (child/shim.py, started here as `gauge.Ours`, never given
candidate code) calls the reference, or its torch.compile form, in requests of as many calls as the candidate's run
made, each on fresh inputs in shared buffers after one cache flush; this process draws the inputs, times each request
from outside, calibrates the requests' overhead with the zero model first (and on the CPU a gauge beside it), and
reads the shim's claimed times against its outside view (`timed_calls.ReferenceCalls`). So a baseline's time holds
what a candidate's holds: its call inside the shim's loop, between the copy of the last call's outputs and the views
of the next call's inputs. The grader caches results on disk, keyed by everything that changes a time: task source,
device name, torch and CUDA versions, precision flags, compile mode and protocol version; a second judgement of a
task re-times nothing.
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
from typing import TYPE_CHECKING, Any

from cuda_agent.judge.protocol import BaselineRequest, BaselineResult, RunRequest
from cuda_agent.subproc import read_record

if TYPE_CHECKING:
    from cuda_agent.judge.child.gauge import Ours


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
    if env.get("release_per_call"):  # calls released one at a time: what lies between two calls changes
        facts["release_per_call"] = True
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


def _run_request(req: BaselineRequest) -> RunRequest:
    """The request a grader of ours times the reference by: the candidate's phase settings. Its correctness fields
    are unused (no output of the reference is judged), so they are the plainest values."""
    return RunRequest(
        task_code=req.task_code,
        task_name=req.task_name,
        solution_path="",
        ext_dir="",
        device=req.device,
        trials=0,
        robustness=False,
        time=True,
        atol=0.0,
        rtol=0.0,
        norm_rtol=0.0,
        strict_precision=False,
        precision_factor=1.0,
        precision_floor=0.0,
        warmup_reps=req.warmup_reps,
        min_reps=req.min_reps,
        max_reps=req.max_reps,
        target_phase_s=req.target_phase_s,
        ci_width=req.ci_width,
        max_phase_s=req.max_phase_s,
        group_calls=req.group_calls,
        max_group_calls=req.max_group_calls,
        release_per_call=req.release_per_call,
        screen_min_elems=0,
        candidate_dir="",
    )


def _warm(ours: Ours) -> None:
    """One request of one call of the model the process calls now, untimed: lazy set-up, and for torch.compile its
    tracing, compiling and autotuning (seconds to tens of seconds of CPU), happen here rather than in the timed turn."""
    from cuda_agent.judge.child.grader import fresh_seed
    from cuda_agent.judge.child.inputs import make_inputs

    refs, _ = ours.load_calls([make_inputs(ours.problem, ours.req.task_name, fresh_seed(), ours.device)])
    ours.call(refs, "warm")


def _prepare(req: BaselineRequest, result: BaselineResult) -> Ours:
    """The process of ours, its reference built (here too: the outputs' shapes), warm eager and under torch.compile
    (a compile it cannot make: `result.compile_error`). Records the flags and the device in `result`."""
    from cuda_agent.judge.child.gauge import Ours, OursFailed
    from cuda_agent.judge.child.inputs import make_inputs

    ours = Ours(_run_request(req))
    try:
        result.flags, result.env = ours.flags, ours.env
        ours.load_reference()
        # A request of the zero model first: the persisting-L2 set-aside the process holds before the reference's
        # calls (as a candidate's process's before its code: `Grader.call`).
        inputs = make_inputs(ours.problem, req.task_name, 0, req.device)
        refs, _ = ours.load_calls([inputs])
        ours.call(refs, "warm", probe=True)
        ours.use_reference()
        _warm(ours)
        result.compile_error = ours.use_reference(compiled=True, compile_mode=req.compile_mode)
        if result.compile_error is None:
            try:
                _warm(ours)
            except OursFailed as exc:  # a reference that torch.compile cannot handle: compare with eager only
                if exc.result.out_of_memory:  # the machine's memory, not the reference's: ours, never cached
                    raise
                result.compile_error = exc.result.message.splitlines()[0][:500] if exc.result.message else "failed"
    except BaseException:
        ours.close()
        raise
    return ours


def _time_model(ours: Ours, req: BaselineRequest, compiled: bool) -> dict[str, Any]:
    """One model's timed phase (`timed_calls.ReferenceCalls`), and on CUDA its kernel times (the `profile` message,
    measured in the process as a candidate's are)."""
    from cuda_agent.judge.child.kernel_time import kernel_summary
    from cuda_agent.judge.child.timed_calls import ReferenceCalls

    start = time.perf_counter()
    ours.use_reference(compiled=compiled, compile_mode=req.compile_mode)
    if ours.gauge is not None:
        ours.gauge.new_phase()
    phase = ReferenceCalls(ours).run_phase()
    kernel = None
    if req.device == "cuda":
        ours.custom_work()
        kernel = kernel_summary(ours.kernel_claim)
    return phase | {"kernel": kernel, "calls_per_group": ours.group, "wall_s": time.perf_counter() - start}


def run(req: BaselineRequest) -> BaselineResult:
    import gc

    import torch

    from cuda_agent.gpu_turns import GpuTurns, NoTurns
    from cuda_agent.judge.child.calibration import calibrate
    from cuda_agent.judge.child.gauge import Gauge, OursFailed
    from cuda_agent.judge.child.grader import start_shim

    # With `gpu_turns` this process takes its own turns on the GPU: a shared one for the set-up and torch.compile's
    # build (which took ~25 s of an exclusive turn per new task on the H100), an exclusive one for the timed
    # phases only.
    turns = GpuTurns(req.gpu_turns) if req.gpu_turns else NoTurns()
    cuda = req.device == "cuda"
    result = BaselineResult()
    ours = None
    # The CPU's gauge (child/gauge.py), as beside a candidate: started now, its import overlapping the set-up.
    gauge = start_shim(namespace=False) if not cuda else None
    try:
        try:
            with turns.shared():
                ours = _prepare(req, result)
        except (OursFailed, torch.OutOfMemoryError) as exc:
            if isinstance(exc, OursFailed) and not exc.result.out_of_memory:
                raise
            # Other baselines build beside it in shared turns, each with its working set (four cold judgements at
            # KernelBench L1/19 sizes hold ~19 GB each): alone, in the exclusive turn, it fits as it did before.
            ours = None
        with turns.exclusive():
            if ours is None:
                gc.collect()
                if cuda:
                    torch.cuda.empty_cache()
                ours = _prepare(req, result)
                result.env["built_alone"] = True  # after running out of memory in a shared turn
            if gauge is not None:
                ours.gauge, gauge = Gauge(ours, gauge), None
            with _timing_lock(req.timing_lock):
                calibrate(ours)  # the candidate's calibration (beside the gauge on the CPU)
                result.group_calls = ours.group
                result.eager = _time_model(ours, req, compiled=False)
                if result.compile_error is None:
                    try:
                        result.compile = _time_model(ours, req, compiled=True)
                    except OursFailed as exc:
                        if exc.result.out_of_memory:
                            raise
                        result.compile_error = exc.result.message[:500]
    finally:
        if gauge is not None:  # never handed to a Gauge
            gauge[1].close()
            gauge[0].close()
        if ours is not None:
            if ours.gauge is not None:
                ours.gauge.close()
            ours.close()
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
