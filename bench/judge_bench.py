"""Judge (task, solution) pairs repeatedly and report per-stage times and timing stability.

Run:
    python bench/judge_bench.py --device cuda --repeat 5 --out OUT_DIR \
        examples/relu=cuda_agent/tasks/examples/solutions/cuda/relu.py kernelbench/L1/19=solutions/kernelbench/L1/19.py

The first judgement of a pair pays the build and the baselines; the later ones find both cached,
which is the steady state in training. Writes `judge_bench.json` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from cuda_agent.judge import JudgeConfig, judge
from cuda_agent.tasks import Catalog


def bench_pair(catalog: Catalog, ref: str, solution: Path, config: JudgeConfig, repeat: int) -> dict:
    task = catalog.resolve(ref)
    runs = []
    for i in range(repeat):
        start = time.monotonic()
        verdict = judge(task, solution, config)
        runs.append(
            {
                "wall_s": time.monotonic() - start,
                "verdict": verdict.verdict,
                "reward": verdict.reward,
                "message": verdict.message[:300],
                "violations": [v.model_dump() for v in verdict.violations],
                "timings_ms": verdict.timings_ms.model_dump(),
                "stage_s": verdict.stage_s,
                "speedup_vs_eager": verdict.speedup_vs_eager,
                "speedup_vs_compile": verdict.speedup_vs_compile,
                "checks": verdict.checks,
                "env": verdict.env if i == 0 else None,
            }
        )
        print(
            f"{ref} #{i}: {verdict.verdict} reward={verdict.reward} {verdict.timings_ms.model_dump()} "
            f"stages={ {k: round(v, 2) for k, v in verdict.stage_s.items()} }",
            flush=True,
        )
    times = [r["timings_ms"]["solution"] for r in runs if r["timings_ms"]["solution"]]
    summary = {"ref": ref, "solution": str(solution), "runs": runs}
    if len(times) >= 2:
        med = statistics.median(times)
        summary["solution_ms_median"] = med
        summary["solution_ms_spread"] = (max(times) - min(times)) / med
    return summary


def prebuild(solutions: list[Path], config: JudgeConfig) -> None:
    """Compile all solutions concurrently (each build is mostly one single-threaded compiler)."""
    from concurrent.futures import ThreadPoolExecutor

    from cuda_agent.judge.build import build_solution
    from cuda_agent.judge.solution import read_solution
    from cuda_agent.machine import detect_device

    device = detect_device(config.device)
    start = time.monotonic()

    def one(path: Path) -> str:
        result = build_solution(path.resolve(), read_solution(path).build_hash, device, config.cache_dir, 900)
        return f"{path}: ok={result.ok} {result.wall_s:.1f}s {result.log[:200]}"

    with ThreadPoolExecutor(max_workers=8) as pool:
        for line in pool.map(one, sorted(set(solutions))):
            print("prebuild", line, flush=True)
    print(f"prebuild of {len(set(solutions))} solutions took {time.monotonic() - start:.1f}s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("pairs", nargs="+", help="TASK=SOLUTION")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--repeat", type=int, default=5, help="judgements per pair (TASK=SOLUTION@N overrides)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--prebuild", action="store_true", help="build every solution in parallel first")
    parser.add_argument("--also-build", nargs="*", type=Path, default=[], help="more solutions to prebuild")
    args = parser.parse_args()
    catalog = Catalog()
    config = JudgeConfig(device=args.device, verdict_cache=False)  # repeats measure judging, not the cache
    if args.prebuild:
        prebuild([Path(p.split("=", 1)[1].partition("@")[0]) for p in args.pairs] + args.also_build, config)
    results = []
    for pair in args.pairs:
        ref, solution = pair.split("=", 1)
        solution, _, repeat = solution.partition("@")
        results.append(bench_pair(catalog, ref, Path(solution), config, int(repeat or args.repeat)))
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "judge_bench.json").write_text(json.dumps(results, indent=1))
    print(
        "\n| task | verdict | reward | solution ms | eager ms | compile ms | vs compile | spread (5 judgements) "
        "| cold wall s | warm wall s (run+baselines) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        first, last = r["runs"][0], r["runs"][-1]
        t = last["timings_ms"]
        warm = last["stage_s"]
        print(
            f"| {r['ref']} | {last['verdict']} | {last['reward']} | {_f(r.get('solution_ms_median'))} | "
            f"{_f(t['eager'])} | {_f(t['compile'])} | {_f(last['speedup_vs_compile'])} | "
            f"{_f(r.get('solution_ms_spread'))} | {first['wall_s']:.1f} | {last['wall_s']:.1f} "
            f"({warm.get('run', 0):.1f}+{warm.get('baselines', 0):.1f}) |"
        )


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


if __name__ == "__main__":
    main()
