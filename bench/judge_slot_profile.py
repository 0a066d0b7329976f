"""Where a judgement's GPU slot goes: the candidate process's steps, timed one by one (issue 20).

A verdict's `stage_s` gives the run stage's phases (correctness, timing, timed outputs, state checks); this names
the work inside them. The task is judged once as usual (build and baselines from the cache when there), its run
request kept; then the worker runs that request again `--repeat` times, each in a fresh process of its own, with
the judge's own functions wrapped by timers that synchronise the GPU before and after (so a kernel's time lands in
the function that launched it). Totals are inclusive (a function's time holds its callees') and come with counts.
The timed window itself is never wrapped (the timed calls' own time is about reps x median).

    python bench/judge_slot_profile.py kernelbench/L1/19 solutions/kernelbench/L1/19.py --device cuda --out $OUT/slot
    python bench/judge_slot_profile.py examples/softmax cuda_agent/tasks/examples/solutions/cpu/softmax.py \\
        --device cpu --out /tmp/slot

Writes `slot_profile.json` (each repeat's totals, counts and stage_s) and prints a table of the medians.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WRAPPED = {
    "cuda_agent.judge.child.worker:CandidateRun": (
        "load_reference",
        "warm_reference",
        "between_calls_ops",
        "import_candidate",
        "correctness",
        "run_trial",
        "call_candidate",
        "check_state",
        "judging",
        "operator_violations",
        "hook_violations",
        "allocator_violations",
        "thread_violations",
        "check_timed_output",
        "custom_work",
    ),
    "cuda_agent.judge.child.timed_calls:TimedCalls": (
        "inputs_for",
        "after_call",
        "judge",
        "still_written",
        "check_last",
    ),
    "cuda_agent.judge.child.inputs": ("make_inputs", "clone_inputs"),
    "cuda_agent.judge.child.timing": ("_flushed", "make_flusher"),
    "cuda_agent.judge.child.trial": (
        "judge_trial",
        "screen_trial",
        "sample_outputs",
        "changed_since",
        "_reference64",
        "check_output",
        "same_values",
    ),
    "cuda_agent.judge.child.guards": ("poison_free_memory", "make_tracer", "new_native_threads", "changed_functions"),
    "cuda_agent.judge.child.hooks": ("profiled_ops",),
    "cuda_agent.judge.child.hooks:OperatorWatch": ("overridden", "watch"),
}


def _wrap_all(totals: dict[str, list[float]]) -> None:
    """Replace each function of WRAPPED by one that adds its synchronised time and a count to `totals`."""
    import importlib

    import torch

    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for where, names in WRAPPED.items():
        module_name, _, cls_name = where.partition(":")
        owner = importlib.import_module(module_name)
        if cls_name:
            owner = getattr(owner, cls_name)
        for name in names:
            original = owner.__dict__[name] if cls_name else getattr(owner, name)
            label = f"{cls_name or module_name.rsplit('.', 1)[-1]}.{name}"
            totals.setdefault(label, [0.0, 0])

            def timed(*args: Any, _original: Any = original, _label: str = label, **kwargs: Any) -> Any:
                sync()
                start = time.perf_counter()
                try:
                    return _original(*args, **kwargs)
                finally:
                    sync()
                    entry = totals[_label]
                    entry[0] += time.perf_counter() - start
                    entry[1] += 1

            setattr(owner, name, functools.wraps(original)(timed))


def child(request_path: Path, result_path: Path) -> None:
    """One profiled run of the worker, in this (fresh) process."""
    from cuda_agent.judge.protocol import RunRequest

    totals: dict[str, list[float]] = {}
    _wrap_all(totals)  # before the worker captures its functions (guards.capture_integrity sees the wrappers)
    from cuda_agent.judge.child import worker

    request = RunRequest.model_validate_json(request_path.read_text())
    start = time.perf_counter()
    result = worker.run(request)
    wall = time.perf_counter() - start
    timing = result.timing or {}
    record = {
        "status": result.status,
        "message": result.message[:500],
        "wall_s": wall,
        "stage_s": result.stage_s,
        "timing": timing,
        "operator_reads": result.env.get("operator_reads"),
        "totals": {k: {"s": v[0], "n": v[1]} for k, v in totals.items() if v[1]},
    }
    result_path.write_text(json.dumps(record, indent=1))


def capture_request(task_ref: str, solution: Path, device: str, keep: Path) -> dict[str, Any]:
    """Judge once as usual, keeping the run stage's request and a copy of the solution file it names."""
    from cuda_agent.judge import JudgeConfig, judge, pipeline
    from cuda_agent.tasks import Catalog

    original = pipeline._Judgement.run_child

    def keeping(self: Any, module: str, request_json: str, workdir: Path, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("stage", args[3] if len(args) > 3 else "") == "run":
            request = json.loads(request_json)
            kept = keep / "solution.py"
            shutil.copyfile(request["solution_path"], kept)
            request["solution_path"] = str(kept)
            (keep / "request.json").write_text(json.dumps(request))
        return original(self, module, request_json, workdir, *args, **kwargs)

    pipeline._Judgement.run_child = keeping
    try:
        verdict = judge(Catalog().resolve(task_ref), solution, JudgeConfig(device=device, verdict_cache=False))
    finally:
        pipeline._Judgement.run_child = original
    if not (keep / "request.json").exists():
        raise SystemExit(f"the judgement never reached its run stage: {verdict.verdict}: {verdict.message[:300]}")
    return {"verdict": verdict.verdict, "stage_s": verdict.stage_s}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("task")
    parser.add_argument("solution", type=Path)
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--child", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    first = capture_request(args.task, args.solution, args.device, args.out)
    print(f"judged once: {first['verdict']}, run stage {first['stage_s'].get('run', 0):.2f} s", flush=True)
    runs = []
    for i in range(args.repeat):
        path = args.out / f"run_{i}.json"
        env_cpu = {"CUDA_VISIBLE_DEVICES": ""} if args.device == "cpu" else {}
        cmd = [sys.executable, "-P", __file__, args.task, str(args.solution), "--out", str(args.out)]
        cmd += ["--child", str(args.out / "request.json"), str(path)]
        subprocess.run(cmd, check=True, env={**os.environ, **env_cpu}, cwd=ROOT)
        runs.append(json.loads(path.read_text()))
        print(f"run {i}: {runs[-1]['status']} in {runs[-1]['wall_s']:.2f} s", flush=True)
    labels = sorted({k for r in runs for k in r["totals"]}, key=lambda k: -runs[0]["totals"].get(k, {"s": 0})["s"])
    print(f"{'function (inclusive)':44} {'median s':>9} {'calls':>6}")
    for label in labels:
        seconds = statistics.median(r["totals"].get(label, {"s": 0.0})["s"] for r in runs)
        calls = runs[0]["totals"].get(label, {"n": 0})["n"]
        print(f"{label:44} {seconds:9.3f} {calls:6d}")
    print(
        "timed calls:",
        [r["timing"].get("reps") for r in runs],
        "median ms",
        [r["timing"].get("median_ms") for r in runs],
    )
    for key in sorted(runs[0]["stage_s"]):
        print(f"stage_s {key:30} {statistics.median(r['stage_s'].get(key, 0.0) for r in runs):8.3f}")
    (args.out / "slot_profile.json").write_text(json.dumps({"first": first, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
