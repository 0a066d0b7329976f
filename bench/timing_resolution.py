"""The outside view's per-call resolution, false alarms on honest solutions, and a judgement's wall time, on the CPU.

Judges each (task, solution) `--n` times in this process (`cuda_agent.judge.judge`, verdict cache off, its own cache
folder, so the first judgement of a task builds and times its baselines and is not counted), and records per
judgement: the verdict and reward, the candidate's, eager's and compile's medians, the outside view's noise per
request and per call (`resolution_ms`), the calls per request, whether the grader took its outside view over the
candidate's claim (`bound_applied`: on an honest solution, a false alarm), and the run stage's and the whole
judgement's wall time. `--tree` picks the checkout whose `cuda_agent` is judged (another tree's, e.g. the main
branch's, for a before/after on the same machine). `--anchor TREE` judges with both trees in turn, one judgement
each (`cuda-agent judge --json` in a process of each tree's, a cache folder per tree), so that both meet the same
load: the before/after side by side in one run, each row marked with its tree. `--honest` (with `--anchor`) judges solutions that run eager's own kernel (`HONEST`, static policy off), whose
time over eager's (`ratio`) says how alike the two sides are timed. `--burst S` runs, beside the
judgements, one busy process per core that works S seconds and rests S seconds, in turn: a load that changes within
a judgement (its calibration at one load, its timed phase at another), where a false alarm shows.

    python bench/timing_resolution.py --n 10 --out OUT
    python bench/timing_resolution.py --tree ../main --n 10 --out OUT_BEFORE
    python bench/timing_resolution.py --anchor ../before --n 8 --out OUT
    python bench/timing_resolution.py --anchor ../before --n 8 --burst 4 --out OUT
    python bench/timing_resolution.py --anchor ../before --honest --n 8 --out OUT

Writes `timing_resolution_rows.json` (one record per judgement) and the summary, `timing_resolution.json` and `.md`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES = {
    "examples/relu": "cuda_agent/tasks/examples/solutions/cpu/relu.py",
    "examples/softmax": "cuda_agent/tasks/examples/solutions/cpu/softmax.py",
}
HONEST = {
    "examples/relu": REPO / "bench/solutions/relu_aten.py",
    "examples/softmax": REPO / "bench/solutions/softmax_aten.py",
}
"""`--honest`: solutions that run eager's own CPU kernel from an extension (ATen's, without the dispatcher), judged
with the static policy off (it refuses `at::` compute): their time over eager's should be 1 within noise."""
JUDGE = """
import sys
from pathlib import Path
from cuda_agent.judge import JudgeConfig, judge
from cuda_agent.tasks import Catalog
ref, solution, cache, static = sys.argv[1:5]
config = JudgeConfig(device="cpu", verdict_cache=False, cache_dir=Path(cache), static_policy=static == "on")
print(judge(Catalog().resolve(ref), Path(solution), config).model_dump_json())
"""
"""One judgement by a tree's judge in a process of its own (`judge_in`)."""


def record(verdict: object, wall_s: float) -> dict:
    """What one judgement says about the outside view (fields an older judge lacks are None)."""
    timing = (verdict.env.get("timing") or {}).get("solution") or {}
    t = verdict.timings_ms
    calls = timing.get("calls_per_request", 1)
    noise = timing.get("noise_ms")
    return {
        "verdict": verdict.verdict,
        "reward": verdict.reward,
        "solution_ms": t.solution if t else None,
        "eager_ms": t.eager if t else None,
        "ratio": t.solution / t.eager if t and t.solution and t.eager else None,
        "compile_ms": t.compile if t else None,
        "claimed_ms": timing.get("claimed_median_ms"),
        "bound_applied": timing.get("bound_applied"),
        "noise_ms": noise,
        "calls_per_request": calls,
        "resolution_ms": timing.get("resolution_ms", noise),
        "overhead_ms": timing.get("overhead_median_ms"),
        "least_gap_ms": timing.get("least_gap_ms"),
        "least_overhead_ms": timing.get("least_overhead_ms"),
        "run_s": verdict.stage_s.get("run"),
        "wall_s": wall_s,
        "drift_ms": (verdict.env.get("load_drift") or {}).get("drift_ms"),
        "eager_now_ms": (verdict.env.get("timing", {}).get("eager_now") or {}).get("median_ms"),
        "eager_now_bound_applied": (verdict.env.get("timing", {}).get("eager_now") or {}).get("bound_applied"),
    }


def burst(period_s: float) -> None:
    """Busy for `period_s` seconds, at rest for as long, in turn, forever (a process per core: `--burst`)."""
    while True:
        if int(time.time() / period_s) % 2:
            end = time.perf_counter() + 0.01
            while time.perf_counter() < end:
                pass
        else:
            time.sleep(0.01)


def judge_in(tree: Path, ref: str, cache: Path, solution: Path, static_policy: bool = True) -> object:
    """One judgement by `tree`'s judge, in a process of its own (`JUDGE`), and its wall time."""
    from cuda_agent.types import Verdict

    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = [sys.executable, "-c", JUDGE, ref, str(solution), str(cache), "on" if static_policy else "off"]
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=tree)
    wall_s = time.perf_counter() - start
    lines = done.stdout.strip().splitlines()
    if not lines:
        raise SystemExit(f"{tree}: no verdict for {ref}: {done.stderr.strip()[-2000:]}")
    return Verdict.model_validate_json(lines[-1]), wall_s


def summary(counted: list[dict]) -> dict:
    return {
        "judgements": len(counted),
        "passed": sum(1 for r in counted if r["verdict"] == "pass"),
        "false_alarms": sum(1 for r in counted if r["bound_applied"]),
        "calls_per_request": sorted({r["calls_per_request"] for r in counted}),
        "resolution_ms_median": statistics.median(r["resolution_ms"] or 0.0 for r in counted),
        "noise_ms_median": statistics.median(r["noise_ms"] or 0.0 for r in counted),
        "ratio_median": statistics.median(r["ratio"] or 0.0 for r in counted),
        "ratios": [round(r["ratio"], 3) if r["ratio"] else None for r in counted],
        "solution_ms_median": statistics.median(r["solution_ms"] or 0.0 for r in counted),
        "eager_ms_median": statistics.median(r["eager_ms"] or 0.0 for r in counted),
        "solution_ms_max": max(r["solution_ms"] or 0.0 for r in counted),
        "run_s_median": statistics.median(r["run_s"] or 0.0 for r in counted),
        "wall_s_median": statistics.median(r["wall_s"] for r in counted),
        "rewards": [r["reward"] for r in counted],
    }


def side_by_side(args: argparse.Namespace) -> int:
    """`--anchor`: each task judged by the anchor's tree and `--tree` in turn."""
    from bench.summary import write_summary

    trees = {"anchor": args.anchor.resolve(), "tree": args.tree.resolve()}
    rows, sections = [], {}
    for ref in args.tasks.split(","):
        for i in range(args.n + 1):
            for name, tree in trees.items():
                solution = HONEST[ref] if args.honest else tree / CASES[ref]
                verdict, wall_s = judge_in(tree, ref, args.out / f"cache-{name}", solution, not args.honest)
                row = record(verdict, wall_s) | {"task": ref, "tree": name, "counted": i > 0}
                rows.append(row)
                print(json.dumps(row), flush=True)
        for name in trees:
            counted = [r for r in rows if r["task"] == ref and r["tree"] == name and r["counted"]]
            sections[f"{ref} ({name}: {trees[name]})"] = summary(counted)
    (args.out / "timing_resolution_rows.json").write_text(json.dumps(rows, indent=1))
    command = "python bench/timing_resolution.py " + " ".join(sys.argv[1:])
    write_summary(args.out, "timing_resolution", "The outside view's resolution on the CPU", sections, command)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=REPO, help="checkout whose cuda_agent is judged")
    parser.add_argument("--n", type=int, default=10, help="counted judgements per task")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tasks", default=",".join(CASES), help="comma-separated, from: " + ", ".join(CASES))
    parser.add_argument("--anchor", type=Path, help="another checkout judged in turn with --tree")
    parser.add_argument("--burst", type=float, help="a load that works and rests this many seconds in turn")
    parser.add_argument("--honest", action="store_true", help="judge HONEST's eager-kernel solutions (with --anchor)")
    args = parser.parse_args()
    if args.burst:
        import multiprocessing

        for _ in range(os.cpu_count() or 1):
            multiprocessing.Process(target=burst, args=(args.burst,), daemon=True).start()
    args.out.mkdir(parents=True, exist_ok=True)
    tree = str(args.tree.resolve())
    sys.path[:0] = [tree, str(REPO)]
    if args.anchor is not None:
        return side_by_side(args)
    from bench.summary import write_summary
    from cuda_agent.judge import JudgeConfig, judge
    from cuda_agent.tasks import Catalog

    config = JudgeConfig(device="cpu", verdict_cache=False, cache_dir=args.out / "cache")
    rows, sections = [], {}
    for ref in args.tasks.split(","):
        task = Catalog().resolve(ref)
        for i in range(args.n + 1):
            start = time.perf_counter()
            verdict = judge(task, args.tree / CASES[ref], config)
            row = record(verdict, time.perf_counter() - start) | {"task": ref, "counted": i > 0}
            rows.append(row)
            print(json.dumps(row), flush=True)
        sections[ref] = summary([r for r in rows if r["task"] == ref and r["counted"]])
        print(ref, json.dumps(sections[ref]), flush=True)
    (args.out / "timing_resolution_rows.json").write_text(json.dumps(rows, indent=1))
    command = "python bench/timing_resolution.py " + " ".join(sys.argv[1:])
    write_summary(args.out, "timing_resolution", "The outside view's resolution on the CPU", sections, command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
