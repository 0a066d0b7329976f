"""GPU benchmark of the local pool: judgements per hour, and timing isolation from busy build workers.

Two measurements, for the lead to run on the H200 (do not run on a machine without a GPU):

1. Throughput: judge every level-1 solution in solutions/kernelbench/L1/ `--repeats` times
   through one LocalPool (builds on all CPU workers in parallel, timing on the GPU's exclusive
   slot). The first round builds (cold); later rounds hit the build cache (warm). Reports
   judgements per hour for each.
2. Timing isolation: time the same kernel (`--isolation-task`) `--samples` times with the build
   workers idle, then `--samples` times while the build workers run `bash utils/compile.sh` in fresh
   CUDA workspaces whose kernel carries a unique comment (nvcc misses the compiler cache each time: the
   load of an agent's build turns), workers - 1 of them at all times. Compiles need no GPU, so they
   never queue before the timed judgements on the GPU's slot, as full judgements would, and the one
   free build worker takes the timed judgements' own build stage (a cache hit). Reports the medians;
   the issue's bar is |busy/idle - 1| < 2%. The pool keeps two cores for its timing worker, away from
   the builds (LocalPool's default on this machine); `--compare-unpinned` then repeats the busy samples
   in a pool that does not, to show what the pinning is worth.

Usage (on the GPU machine, from the repository root):
    TORCH_CUDA_ARCH_LIST=9.0 python bench/sandbox_gpu.py --out bench/results/h200-DATE/sandbox_gpu.json
Options: --repeats 2 --samples 5 --workers 15 --isolation-task kernelbench/L1/19 --baselines FILE (seed the
baseline cache from a `cuda-agent bench baselines` file, so that rounds time candidates, not references)
Takes roughly: cold builds 7 x 60 s over the workers, then the timed judgements (about 30 s each
with baselines cached), then 2 x samples isolation judgements.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import Future
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cuda_agent.sandbox.jobs import CommandJob, make_judge_job  # noqa: E402
from cuda_agent.sandbox.local import LocalPool  # noqa: E402
from cuda_agent.tasks import Catalog  # noqa: E402
from cuda_agent.workspace import create_workspace  # noqa: E402

L1 = ROOT / "solutions" / "kernelbench" / "L1"


def judge_round(pool: LocalPool, config: dict) -> tuple[float, list[dict]]:
    jobs = [make_judge_job(f"kernelbench/L1/{path.stem}", path.read_text(), config) for path in sorted(L1.glob("*.py"))]
    start = time.monotonic()
    futures = [pool.submit(job) for job in jobs]
    results = [f.result() for f in futures]
    wall_s = time.monotonic() - start
    rows = [
        {"task": job.task, "status": r.status, "verdict": r.verdict and r.verdict.verdict, "error": r.error}
        for job, r in zip(jobs, results, strict=True)
    ]
    return wall_s, rows


class BusyCompiles:
    """Keeps `in_flight` uncached workspace compiles running until stopped: the template's one-kernel
    workspace with its kernel salted, a fresh workspace each time. Run with one build worker fewer than
    the pool has, so that the timed judgements' own (cached) build stage is not queued behind them."""

    def __init__(self, pool: LocalPool, in_flight: int, work: Path, device: str = "cuda") -> None:
        self.pool, self.work, self.device = pool, work, device
        self.task = Catalog().resolve("examples/scale_add")
        self.lock = threading.Lock()
        self.running: dict[str, Future] = {}
        self.results: list = []
        self.stopped = False
        for _ in range(in_flight):
            self._submit()

    def _submit(self) -> None:
        with self.lock:
            if self.stopped:
                return
            n = len(self.results) + len(self.running)
            root = create_workspace(self.task, self.work / f"busy{n}", device=self.device)
            kernel = root / "kernels" / ("example_scale.cu" if self.device == "cuda" else "example_scale.cpp")
            kernel.write_text(f"// {uuid.uuid4().hex}\n" + kernel.read_text())
            job = CommandJob(argv=["bash", "utils/compile.sh"], cwd=str(root), timeout_s=300)
            future = self.pool.submit(job)
            self.running[job.id] = future
        future.add_done_callback(lambda f, job_id=job.id: self._done(job_id, f))

    def _done(self, job_id: str, future: Future) -> None:
        with self.lock:
            self.running.pop(job_id, None)
            self.results.append(future.result())
        self._submit()

    def stop(self) -> dict:
        with self.lock:
            self.stopped = True
            running = list(self.running)
            finished = list(self.results)
        for job_id in running:
            self.pool.cancel(job_id)
        ok = [r for r in finished if r.status == "done" and r.command is not None and r.command.exit_code == 0]
        return {
            "compiles_finished": len(finished),
            "compiles_ok": len(ok),
            "compile_wall_s_median": statistics.median(r.command.wall_s for r in ok) if ok else None,
            "compiles_cancelled_at_stop": len(running),
        }


def time_kernel(pool: LocalPool, task: str, config: dict, samples: int) -> list[float]:
    solution = (L1 / f"{task.rsplit('/', 1)[1]}.py").read_text()
    times = []
    for _ in range(samples):
        start = time.monotonic()
        result = pool.run(make_judge_job(task, solution, config))
        assert result.status == "done" and result.verdict.verdict == "pass", result.error or result.verdict.message
        times.append(result.verdict.timings_ms.solution)
        print(f"  {times[-1]:.4f} ms (judged in {time.monotonic() - start:.1f} s)", flush=True)
    return times


def busy_samples(pool: LocalPool, args: argparse.Namespace, in_flight: int, config: dict) -> tuple[list[float], dict]:
    busy = BusyCompiles(pool, in_flight, Path(tempfile.mkdtemp(prefix="busy-")))
    time.sleep(10)  # let the compilers start before the first timed sample
    try:
        return time_kernel(pool, args.isolation_task, config, args.samples), busy.stop()
    except BaseException:
        busy.stop()
        raise


def save(report: dict, out: Path | None) -> None:
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(report, indent=2) + "\n")
        tmp.replace(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--isolation-task", default="kernelbench/L1/19")
    parser.add_argument(
        "--busy-builds",
        type=int,
        default=None,
        help="uncached workspace compiles kept running during the busy samples (workers - 1)",
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--compare-unpinned", action="store_true", help="repeat the busy samples in a pool without reserved cores"
    )
    parser.add_argument("--warm", action="store_true", help="the builds are already cached (say so in the report)")
    parser.add_argument(
        "--baselines", type=Path, default=None, help="seed the judge's baseline cache from this file (bench baselines)"
    )
    args = parser.parse_args()
    in_flight = args.busy_builds if args.busy_builds is not None else args.workers - 1
    if not 1 <= in_flight < args.workers:
        # The timed judgement's own build stage needs a free build worker, else it waits behind the load.
        parser.error(f"--busy-builds must be 1 to workers - 1 ({args.workers - 1}); --workers must be at least 2")
    if args.baselines is not None and args.baselines.exists():
        from cuda_agent.evaluation.baselines import seed_cache

        print(f"seeded {seed_cache(args.baselines)} baselines from {args.baselines}", flush=True)
    config = {"device": "cuda", "verdict_cache": False}  # rounds measure judging, not the verdict cache
    report: dict = {"settings": {k: str(v) for k, v in vars(args).items()}, "rounds": []}
    with LocalPool(build_workers=args.workers) as pool:
        assert pool.gpus, "no GPU visible: this benchmark is for the GPU machine"
        for i in range(args.repeats):
            wall_s, rows = judge_round(pool, config)
            report["rounds"].append(
                {
                    "round": i,
                    "cache": "cold" if i == 0 and not args.warm else "warm",
                    "wall_s": wall_s,
                    "per_hour": 3600 * len(rows) / wall_s,
                }
                | {"rows": rows}
            )
            last = report["rounds"][-1]
            verdicts = [row["verdict"] or row["status"] for row in rows]
            print(f"round {i} ({last['cache']}): {wall_s:.1f} s, {last['per_hour']:.0f}/h, {verdicts}", flush=True)
            save(report, args.out)  # a time limit later on loses nothing measured so far
        idle = time_kernel(pool, args.isolation_task, config, args.samples)
        print(f"idle: {idle}", flush=True)
        report["isolation"] = {"task": args.isolation_task, "cpus": pool.cpu_plan.as_metrics(), "idle_ms": idle}
        save(report, args.out)
        busy_ms, load = busy_samples(pool, args, in_flight, config)
        ratio = statistics.median(busy_ms) / statistics.median(idle)
        report["isolation"] |= {
            "busy_ms": busy_ms,
            "median_ratio_busy_over_idle": ratio,
            "within_2_percent": abs(ratio - 1) < 0.02,
            "busy_load": load,
        }
        print(f"busy: {busy_ms}; busy/idle {ratio:.4f}; load {load}", flush=True)
        report["metrics"] = pool.metrics().model_dump()
        save(report, args.out)
    if args.compare_unpinned:
        with LocalPool(build_workers=args.workers, pin_cpus=False) as pool:
            busy_ms, load = busy_samples(pool, args, in_flight, config)
        ratio = statistics.median(busy_ms) / statistics.median(idle)
        report["unpinned"] = {"busy_ms": busy_ms, "median_ratio_busy_over_idle": ratio, "busy_load": load}
        print(f"unpinned busy: {busy_ms}; busy/idle {ratio:.4f}; load {load}", flush=True)
    print(json.dumps(report, indent=2))
    save(report, args.out)
    return 0 if report["isolation"]["within_2_percent"] else 1


if __name__ == "__main__":
    sys.exit(main())
