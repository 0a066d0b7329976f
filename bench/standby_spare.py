"""Issue 20.4: does a spare judge-stage runner (sandbox/spare.py) hide the candidate process's start?

Judges `--n` candidates with distinct bytes (the bundled solution plus a comment: one build for all, cached by a
first judgement that is not counted) through LocalPool (`--pool ray`: a RayPool of one actor on a local Ray, every
stage of a job on that actor), once per `--spares` setting (0: none, the old way), with the verdict cache off. Two ways of arriving: `sequential` (the next judgement is submitted when the previous one
is answered, as a `cuda-agent serve` client does) and `batch` (all at once, as an RL step does). Per judgement:
the client's wall, the standby's own set-up (`run.standby_ready`), how long the judgement waited for it
(`run.standby_wait`) and whether it was a spare (`env.standby_worker`); per setting the medians, over all and
over the steady judgements (the first one of a pool aside: a fresh pool has no warm spare yet).

    python bench/standby_spare.py --device cpu --out OUT                      # CPU: examples/relu
    python bench/standby_spare.py --device cuda --out OUT --n 6 --spares 0,1,2   # H200: kernelbench/L1/19
    python bench/standby_spare.py --pool ray --modes sequential --out OUT         # the same through RayPool

Writes OUT/standby_spare.json and prints one line per setting and mode.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from concurrent.futures import wait
from pathlib import Path
from typing import TYPE_CHECKING

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cuda_agent.sandbox.jobs import JobResult, make_judge_job  # noqa: E402
from cuda_agent.sandbox.local import LocalPool  # noqa: E402

if TYPE_CHECKING:
    from cuda_agent.sandbox.ray_pool import RayPool

TARGETS = {
    "cuda": ("kernelbench/L1/19", REPO / "solutions/kernelbench/L1/19.py"),
    "cpu": ("examples/relu", REPO / "cuda_agent/tasks/examples/solutions/cpu/relu.py"),
}


def _row(result: JobResult, wall_s: float) -> dict:
    verdict = result.verdict
    if verdict is None:
        return {"wall_s": round(wall_s, 2), "status": result.status, "error": result.error}
    stage = verdict.stage_s
    return {
        "wall_s": round(wall_s, 2),
        "queued_s": round(result.queued_s, 2),
        "verdict": verdict.verdict,
        "standby_worker": verdict.env.get("standby_worker"),
        "standby_spare_discarded": verdict.env.get("standby_spare_discarded"),
        "standby_ready_s": round(stage.get("run.standby_ready", 0.0), 2),
        "standby_wait_s": round(stage.get("run.standby_wait", 0.0), 2),
        "gpu_held_run_s": round(stage["gpu_held.run"], 2) if "gpu_held.run" in stage else None,
        "run_s": round(stage.get("run", 0.0), 2),
    }


def _median(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return round(statistics.median(values), 2) if values else None


def _summary(rows: list[dict], total_s: float) -> dict:
    steady = rows[1:]
    return {
        "n": len(rows),
        "total_s": round(total_s, 2),
        "passed": sum(r.get("verdict") == "pass" for r in rows),
        "spares_used": sum(r.get("standby_worker") == "spare started ahead" for r in rows),
        "spares_discarded": [r["standby_spare_discarded"] for r in rows if r.get("standby_spare_discarded")],
        **{f"median_{k}": _median(rows, k) for k in ("wall_s", "standby_wait_s", "standby_ready_s")},
        **{f"steady_median_{k}": _median(steady, k) for k in ("wall_s", "standby_wait_s")},
    }


def make_pool(args: argparse.Namespace, spares: int) -> LocalPool | RayPool:
    """The pool measured: LocalPool (`--build-workers`, its one timing slot), or RayPool of one actor."""
    if args.pool == "ray":
        from cuda_agent.sandbox.ray_pool import RayPool

        return RayPool(cpu_actors=1, spares=spares)
    return LocalPool(build_workers=args.build_workers, spares=spares)


def _pooled(settings: list[dict]) -> dict:
    """One setting's rounds together: the median total, and medians over every judgement (steady: each pool's
    first one aside)."""
    rows = [r for s in settings for r in s["rows"]]
    steady = [r for s in settings for r in s["rows"][1:]]
    return {
        "rounds": len(settings),
        "median_total_s": round(statistics.median(s["summary"]["total_s"] for s in settings), 2),
        "spares_used": sum(s["summary"]["spares_used"] for s in settings),
        **{f"median_{k}": _median(rows, k) for k in ("wall_s", "standby_wait_s", "standby_ready_s")},
        **{f"steady_median_{k}": _median(steady, k) for k in ("wall_s", "standby_wait_s")},
    }


def run_setting(args: argparse.Namespace, spares: int, mode: str, source: str) -> dict:
    """One pool with `spares` spares per timing worker: `--n` judgements arriving in `mode`."""
    config = {"device": args.device, "verdict_cache": False}
    jobs = [
        make_judge_job(args.task, source + f"\n# candidate {mode} {spares} {i} {time.time_ns()}\n", config)
        for i in range(args.n)
    ]
    with make_pool(args, spares) as pool:
        start = time.monotonic()
        rows = []
        if mode == "sequential":
            for job in jobs:
                submitted = time.monotonic()
                result = pool.run(job)
                rows.append(_row(result, time.monotonic() - submitted))
                time.sleep(args.gap_s)
        else:
            futures = [pool.submit(job) for job in jobs]
            wait(futures)
            rows = [_row(f.result(), f.result().queued_s + f.result().run_s) for f in futures]
        total = time.monotonic() - start
    return {"spares": spares, "mode": mode, "summary": _summary(rows, total), "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--pool", choices=["local", "ray"], default="local", help="ray: a local Ray, one actor")
    parser.add_argument("--task", help="default: kernelbench/L1/19 on cuda, examples/relu on cpu")
    parser.add_argument("--solution", type=Path, help="default: the task's bundled solution")
    parser.add_argument("--n", type=int, default=6, help="judgements per setting and mode")
    parser.add_argument("--spares", default="0,1", help="comma-separated spares per timing worker to compare")
    parser.add_argument("--modes", default="sequential,batch")
    parser.add_argument("--gap-s", type=float, default=0.0, help="sequential: the client's pause between judgements")
    parser.add_argument("--build-workers", type=int, default=1)
    parser.add_argument(
        "--rounds", type=int, default=1, help="run the settings this many times, taking turns (a noisy machine)"
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    default_task, default_solution = TARGETS[args.device]
    args.task = args.task or default_task
    source = (args.solution or default_solution).read_text()
    args.out.mkdir(parents=True, exist_ok=True)

    if args.pool == "ray":
        import ray

        # One CPU for the actor, one to spare; a GPU machine's Ray counts its GPUs (one actor each).
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    with make_pool(args, 0) as pool:  # the build and baselines, not counted
        first = pool.run(make_judge_job(args.task, source, {"device": args.device, "verdict_cache": False}))
    print("warm-up:", first.status, first.verdict and first.verdict.verdict, first.error or "", flush=True)

    report = {
        "machine": {"host": platform.node(), "cpus": os.cpu_count()},
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "argv": sys.argv,
        "pool": args.pool,
        "task": args.task,
        "warm_up": _row(first, first.queued_s + first.run_s),
        "settings": [],
    }
    settings = [int(s) for s in args.spares.split(",")]
    for mode in args.modes.split(","):
        for round_ in range(args.rounds):
            for spares in settings:
                setting = run_setting(args, spares, mode, source)
                report["settings"].append(setting | {"round": round_, "load_avg": os.getloadavg()})
                print(f"{mode:<10} spares={spares} round {round_}: {json.dumps(setting['summary'])}", flush=True)
                # After every setting: a run cut short by its time limit keeps what it measured.
                (args.out / "standby_spare.json").write_text(json.dumps(report, indent=1))
        if args.rounds > 1:
            for spares in settings:
                pooled = _pooled([s for s in report["settings"] if (s["mode"], s["spares"]) == (mode, spares)])
                report.setdefault("pooled", []).append({"mode": mode, "spares": spares, **pooled})
                print(f"{mode:<10} spares={spares} all {args.rounds} rounds: {json.dumps(pooled)}", flush=True)
            (args.out / "standby_spare.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
