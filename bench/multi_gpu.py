"""The sandbox pools across several GPUs: throughput scaling, every job answered once, cross-GPU agreement.

On a host with N GPUs (the 2-8 H200 machines), in this order:

0. Cold round: every legit level-1 solution (solutions/kernelbench/L1/*.py) judged once by a LocalPool on
   all N GPUs. It fills the build cache (and the baseline cache for tasks that --baselines lacks), so every
   later run is warm: its builds are cache hits (each run reports its jobs' run and queue seconds, and how
   many verdicts found their baselines cached). Reported apart, as "cold".
1. Agreement: one kernel (--agreement-task, default kernelbench/L1/19) judged --samples times pinned to
   each GPU (`JudgeJob.gpu`) through one LocalPool; each GPU's median solution time and the max/min ratio
   of those medians (target < 1.02).
2. Scaling: for k in --ks (default 1, 2, 4, 8 up to N, and N; run from the largest down), a LocalPool with
   gpus=[0..k-1] (one exclusive timing worker per GPU, --build-workers build workers on the CPUs) judges a
   fixed load, the solutions repeated --repeats times with distinct job ids; then the same with the RayPool
   (a local Ray started with num_gpus=k, one actor per GPU, each actor building and timing its own jobs).
   Judgements per hour per run, and per pool the speed-up and efficiency against k=1.
3. Counting, in every run: ids submitted against ids answered (lost, answered twice, answered under
   another id), the pool's own submitted/completed counters, and any error the pool logged (a second
   answer to a job is dropped and logged, so it shows there).

Time: every step gets a share of --budget-s (what is left, divided by weight among the steps left; runs that
end early leave more to the later ones). A run that reaches its share cancels its unanswered jobs, says
`cut_by_budget` and reports throughput over the part that ran. The JSON report (--out) is rewritten after
every step, so a kill loses only the step in progress. Every process this starts (pools, runners, judges,
Ray) has NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NVSHMEM_DISABLE_NVLS=1 (the GPU
machines' rule: NVLink multicast off); a probe command in each pool records what its jobs see.

--cpu-slots N runs the same logic on a machine without a GPU: N CPU timing slots (Ray: N CPU actors) stand
for the GPUs and the bundled CPU examples (cuda_agent/tasks/examples/solutions/cpu/*.py, tasks examples/*)
for the level-1 load. A dry run of the benchmark, not a measurement of GPUs.

Usage (repository root; bench/device/multi_gpu.sh wraps the GPU run as one device call):
    python bench/multi_gpu.py --baselines bench/results/h200-2026-12-03/kernelbench_baselines.json \\
        --budget-s 470 --out OUT/multi_gpu.json
    CUDA_AGENT_CACHE=/tmp/ca-multi-gpu-cpu nice -n 10 python bench/multi_gpu.py --cpu-slots 2 \\
        --tasks examples/relu,examples/row_sum,examples/softmax,examples/matmul \\
        --judge-config '{"trials": 2, "robustness_trials": false}' --samples 3 --budget-s 420 --out FILE.json
Options: --ks 1,2,4,8 --pools local,ray --repeats R --samples S --agreement-task REF --build-workers B
--tasks REF,REF --judge-config JSON --baselines FILE. The cache is $CUDA_AGENT_CACHE, by default a folder of
this benchmark's own (~/.cache/cuda-agent-multi-gpu), so that its cold round is cold.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from concurrent.futures import wait
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# The GPU machines' rule, for this process and everything it starts (children inherit os.environ).
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
os.environ.update(MULTICAST_OFF)
# A cache of its own (builds, baselines), so that the cold round is cold.
os.environ.setdefault("CUDA_AGENT_CACHE", str(Path.home() / ".cache" / "cuda-agent-multi-gpu"))

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.summary import write_summary  # noqa: E402
from cuda_agent.machine import detect_gpus  # noqa: E402
from cuda_agent.sandbox.jobs import CommandJob, JobResult, JudgeJob, make_judge_job  # noqa: E402
from cuda_agent.sandbox.local import LocalPool  # noqa: E402

GPU_SOLUTIONS = ROOT / "solutions" / "kernelbench" / "L1"
CPU_SOLUTIONS = ROOT / "cuda_agent" / "tasks" / "examples" / "solutions" / "cpu"
PROBE = 'echo "$NCCL_NVLS_ENABLE $TORCH_SYMM_MEM_DISABLE_MULTICAST $NVSHMEM_DISABLE_NVLS"'
CANCEL_WAIT_S = 90.0


@dataclass(frozen=True)
class Load:
    """What is judged where: the device, the timing slots (GPU indices or CPU slot numbers) and the candidates."""

    device: str
    slots: list[int]
    candidates: list[tuple[str, Path]]
    agreement: tuple[str, Path]
    config: dict[str, Any]

    def jobs(self, repeats: int) -> list[JudgeJob]:
        """The fixed load: every candidate `repeats` times, each a job with its own id."""
        return [make_judge_job(task, Path(path), self.config) for _ in range(repeats) for task, path in self.candidates]


def make_load(args: argparse.Namespace) -> Load:
    # Repeats and cross-GPU agreement measure judging: no verdict-cache answers unless asked for.
    config = {"device": "cpu" if args.cpu_slots else "cuda", "verdict_cache": False} | json.loads(args.judge_config)
    if args.cpu_slots:
        slots = list(range(args.cpu_slots))
        candidates = [(f"examples/{p.stem}", p) for p in sorted(CPU_SOLUTIONS.glob("*.py"))]
        agreement = args.agreement_task or "examples/matmul"
        folder = CPU_SOLUTIONS
    else:
        slots = detect_gpus()
        if not slots:
            raise SystemExit("no GPU visible (nvidia-smi -L): run on the multi-GPU machine, or pass --cpu-slots N")
        candidates = [(f"kernelbench/L1/{p.stem}", p) for p in sorted(GPU_SOLUTIONS.glob("*.py"), key=_number)]
        agreement = args.agreement_task or "kernelbench/L1/19"
        folder = GPU_SOLUTIONS
    if args.tasks:
        keep = set(args.tasks.split(","))
        candidates = [(task, path) for task, path in candidates if task in keep]
        if len(candidates) != len(keep):
            raise SystemExit(f"--tasks {args.tasks}: not all of them have a solution in {folder}")
    solution = folder / f"{agreement.rsplit('/', 1)[1]}.py"
    if not solution.exists():
        raise SystemExit(f"--agreement-task {agreement}: no solution {solution}")
    return Load(config["device"], slots, candidates, (agreement, solution), config)


def _number(path: Path) -> int:
    return int(path.stem) if path.stem.isdigit() else 0


class PoolErrors(logging.Handler):
    """Collects what the pools log at ERROR and above (a job answered twice is logged and dropped)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def run_jobs(pool: Any, jobs: list[JudgeJob], limit_s: float, label: str) -> tuple[dict, dict[str, JobResult]]:
    """Submit every job, wait up to `limit_s`, cancel what is unanswered then; count the answers by id."""
    errors = PoolErrors()
    logging.getLogger("cuda_agent.sandbox").addHandler(errors)
    progress = Counter()
    answered_at: list[float] = []
    lock = threading.Lock()
    start = time.monotonic()

    def report(job: JudgeJob, future) -> None:
        result: JobResult = future.result()
        with lock:
            progress["n"] += 1
            if result.status == "done":
                answered_at.append(round(time.monotonic() - start, 2))
            what = result.verdict.verdict if result.verdict else f"{result.status}: {(result.error or '')[:120]}"
            print(f"  [{label}] {progress['n']}/{len(jobs)} {job.task} {what} on {result.worker} "
                  f"({time.monotonic() - start:.1f} s)", flush=True)  # fmt: skip

    try:
        futures = {}
        for job in jobs:
            futures[job.id] = pool.submit(job)
            futures[job.id].add_done_callback(lambda f, job=job: report(job, f))
        done, pending = wait(list(futures.values()), timeout=max(limit_s, 1.0))
        wall_s = time.monotonic() - start
        if pending:
            for job_id, future in futures.items():
                if not future.done():
                    pool.cancel(job_id)
            wait(pending, timeout=CANCEL_WAIT_S)
    finally:
        logging.getLogger("cuda_agent.sandbox").removeHandler(errors)
    answers = {job_id: f.result() for job_id, f in futures.items() if f.done()}
    in_time = [answers[job_id] for job_id, f in futures.items() if f in done]
    row = count(jobs, answers, in_time, wall_s, bool(pending), errors.messages, pool)
    # When each judgement came back: the steady rate of a short or cut run is (n - 1) / (last - first).
    return row | {"answered_at_s": sorted(answered_at)}, answers


def count(
    jobs: list[JudgeJob], answers: dict, in_time: list[JobResult], wall_s: float, cut: bool, errors: list, pool: Any
) -> dict:
    """The run's record: counts by id, throughput over the time it ran, verdicts and where jobs ran."""
    returned = Counter(result.job_id for result in answers.values())
    judged = [r for r in in_time if r.status == "done" and r.verdict is not None]
    metrics = pool.metrics()
    row = {
        "jobs": len(jobs),
        "answered": len(answers),
        "lost": [job.id for job in jobs if returned[job.id] == 0],
        "answered_twice": [job_id for job_id, n in returned.items() if n > 1],
        "answered_under_another_id": [job_id for job_id, r in answers.items() if r.job_id != job_id],
        "pool_errors": errors,
        "cut_by_budget": cut,
        "wall_s": round(wall_s, 2),
        "judgements": len(judged),
        "per_hour": round(3600 * len(judged) / wall_s, 1) if wall_s > 0 else None,
        "statuses": dict(Counter(r.status for r in answers.values())),
        "verdicts": dict(Counter(r.verdict.verdict for r in answers.values() if r.verdict)),
        "by_worker": dict(sorted(Counter(r.worker for r in in_time).items())),
        # Seconds from a job's first stage to its answer (a cold build shows here; the final verdict's env
        # always says build_cached, because the build stage before it made the build).
        "job_run_s": _quantiles([r.run_s for r in judged]),
        "job_queued_s": _quantiles([r.queued_s for r in judged]),
        "baseline_cached": sum(bool(r.verdict.env.get("baseline_cached")) for r in judged),
        "errors": sorted({r.error[:300] for r in answers.values() if r.error})[:5],
        "metrics": metrics.model_dump(),
    }
    # The pool's counters include the probe command, answered before the load was submitted.
    row["counts_ok"] = (
        not row["lost"]
        and not row["answered_twice"]
        and not row["answered_under_another_id"]
        and not errors
        and row["answered"] == row["jobs"]
        and metrics.submitted == metrics.completed
        and metrics.queue_depth == metrics.running == 0
    )
    return row


def _quantiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {"min": round(min(values), 2), "median": round(statistics.median(values), 2), "max": round(max(values), 2)}


def probe(pool: Any) -> dict:
    """What a job's process sees of the multicast switches (a command on a timing slot / actor)."""
    with tempfile.TemporaryDirectory(prefix="multi-gpu-probe-") as folder:
        Path(folder).chmod(0o755)  # commands may run as an unprivileged user
        result = pool.run(CommandJob(argv=["bash", "-c", PROBE], cwd=folder, timeout_s=120, timing=True))
    seen = result.command.stdout.split() if result.command else []
    return {"seen": dict(zip(MULTICAST_OFF, seen, strict=False)), "ok": seen == list(MULTICAST_OFF.values())}


def local_pool(load: Load, k: int, args: argparse.Namespace, pending: int) -> LocalPool:
    if load.device == "cuda":
        return LocalPool(build_workers=args.build_workers, gpus=load.slots[:k], max_pending=pending)
    return LocalPool(build_workers=args.build_workers, gpus=[], cpu_timing_slots=k, max_pending=pending)


def start_ray(load: Load, k: int) -> Any:
    """A fresh local Ray with k GPUs (or k CPUs for k CPU actors), and a RayPool on it."""
    import ray

    from cuda_agent.sandbox.ray_pool import RayPool

    if ray.is_initialized():
        ray.shutdown()
    cuda = load.device == "cuda"
    ray.init(
        num_gpus=k if cuda else 0,
        num_cpus=(os.cpu_count() or 2) if cuda else k,
        include_dashboard=False,
        log_to_driver=False,
    )
    return RayPool(cpu_actors=k, max_pending=4096)


def run_step(kind: str, k: int, load: Load, jobs: list[JudgeJob], limit_s: float, args) -> tuple[dict, dict]:
    """One pool of one kind and size: start it, probe it, judge `jobs` within `limit_s`, close it."""
    label = f"{kind} k={k}"
    start = time.monotonic()
    row: dict[str, Any] = {"pool": kind, "k": k, "limit_s": round(limit_s, 1)}
    pool = None
    try:
        pool = start_ray(load, k) if kind == "ray" else local_pool(load, k, args, len(jobs) + 8)
        row["slots"] = list(pool.slots)
        row["start_s"] = round(time.monotonic() - start, 2)
        row["probe"] = probe(pool)
        counted, answers = run_jobs(pool, jobs, limit_s - (time.monotonic() - start), label)
        row |= counted
    except Exception as exc:  # a step that fails is recorded, and the benchmark goes on with the next
        row["failed"] = f"{type(exc).__name__}: {exc}"
        row["traceback"] = traceback.format_exc()[-3000:]
        answers = {}
    finally:
        if pool is not None:
            pool.close()
    row["step_s"] = round(time.monotonic() - start, 2)
    return row, answers


def agreement(load: Load, args: argparse.Namespace, limit_s: float) -> dict:
    """The same kernel judged `samples` times pinned to each slot; each slot's median and the max/min ratio."""
    task, solution = load.agreement
    jobs = [
        make_judge_job(task, Path(solution), load.config, gpu=slot) for _ in range(args.samples) for slot in load.slots
    ]
    row, answers = run_step("local", len(load.slots), load, jobs, limit_s, args)
    row |= {"step": "agreement", "task": task, "samples": args.samples}
    times: dict[int, list[float]] = {slot: [] for slot in load.slots}
    misrouted = 0
    for job in jobs:
        result = answers.get(job.id)
        if result is None or result.verdict is None or result.verdict.verdict != "pass":
            continue
        misrouted += result.worker != f"timing-{load.slots.index(job.gpu)}"
        if result.verdict.timings_ms.solution is not None:
            times[job.gpu].append(result.verdict.timings_ms.solution)
    medians = {slot: statistics.median(ts) for slot, ts in times.items() if ts}
    row["solution_ms"] = {str(slot): ts for slot, ts in times.items()}
    row["median_ms"] = {str(slot): m for slot, m in medians.items()}
    row["misrouted"] = misrouted
    if len(medians) >= 2:
        ratio = max(medians.values()) / min(medians.values())
        row["max_over_min"] = round(ratio, 5)
        row["within_2_percent"] = ratio < 1.02
    return row


def default_ks(n: int) -> list[int]:
    return sorted({k for k in (1, 2, 4, 8) if k <= n} | {n}, reverse=True)


def plan_steps(args: argparse.Namespace, load: Load) -> list[tuple[str, int, float]]:
    """(step, k, weight): a step's share of the budget is its weight over the weights of the steps left."""
    n = len(load.slots)
    ks = sorted({int(k) for k in args.ks.split(",")}, reverse=True) if args.ks else default_ks(n)
    if any(not 1 <= k <= n for k in ks):
        raise SystemExit(f"--ks {args.ks}: each k must be 1..{n}")
    pools = [p for p in args.pools.split(",") if p]
    steps = [("cold", n, 4.0), ("agreement", n, 1.0)]  # cold: builds (~1 min on the H200) before any timing
    steps += [(pool, k, 1 / k + 0.2) for pool in pools for k in ks]  # a run costs about load / k, plus start-up
    return steps


def scaling(runs: list[dict]) -> dict:
    """Per pool: judgements/hour by k, and the speed-up and efficiency (speed-up / k) against k=1."""
    summary: dict[str, dict] = {}
    for row in runs:
        if row.get("per_hour"):
            summary.setdefault(row["pool"], {"per_hour": {}})["per_hour"][row["k"]] = row["per_hour"]
    for by_pool in summary.values():
        base = by_pool["per_hour"].get(1)
        if base:
            by_pool["speedup"] = {k: round(v / base, 3) for k, v in by_pool["per_hour"].items()}
            by_pool["efficiency"] = {k: round(v / base / k, 3) for k, v in by_pool["per_hour"].items()}
    return summary


def save(report: dict, path: Path | None) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=1) + "\n")
    tmp.replace(path)  # atomic: a kill never leaves half a report


def machine(load: Load) -> dict:
    import torch

    info = {
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": load.device,
        "slots": load.slots,
        "multicast_env": {k: os.environ.get(k) for k in MULTICAST_OFF},
        "cuda_agent_cache": os.environ.get("CUDA_AGENT_CACHE"),
    }
    try:
        import ray

        info["ray"] = ray.__version__
    except ImportError as exc:
        info["ray"] = f"not importable: {exc}"
    return info


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cpu-slots", type=int, default=0, help="dry run: N CPU timing slots, the CPU examples")
    parser.add_argument("--ks", default="", help="pool sizes, e.g. 1,2,4,8 (default: powers of 2 up to N, and N)")
    parser.add_argument("--pools", default="local,ray", help="which pools to scale: local, ray or both")
    parser.add_argument("--tasks", default="", help="comma list: judge only these of the candidates")
    parser.add_argument("--repeats", type=int, default=0, help="load = solutions x repeats (default: >= 2N jobs)")
    parser.add_argument("--samples", type=int, default=4, help="agreement judgements per GPU")
    parser.add_argument("--agreement-task", default="", help="default kernelbench/L1/19 (CPU: examples/matmul)")
    parser.add_argument("--build-workers", type=int, default=0, help="LocalPool build workers (default: CPUs - N)")
    parser.add_argument("--judge-config", default="{}", help="JSON of JudgeConfig fields for every job")
    parser.add_argument("--baselines", type=Path, default=None, help="seed the judge's baseline cache from this file")
    parser.add_argument("--budget-s", type=float, default=470.0, help="all steps end by then (the last may overrun)")
    parser.add_argument("--out", type=Path, default=None, help="the JSON report, rewritten after every step")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    deadline = time.monotonic() + args.budget_s
    load = make_load(args)
    n = len(load.slots)
    args.repeats = args.repeats or max(1, math.ceil(2 * n / len(load.candidates)))
    args.build_workers = args.build_workers or max(1, (os.cpu_count() or 2) - (0 if args.cpu_slots else n))
    steps = plan_steps(args, load)
    report: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "machine": machine(load),
        "load": {"candidates": [t for t, _ in load.candidates], "repeats": args.repeats, "config": load.config},
        "plan": [f"{step} k={k}" for step, k, _ in steps],
        "runs": [],
    }
    if args.baselines is not None:
        from cuda_agent.evaluation.baselines import seed_cache

        report["baselines_seeded"] = seed_cache(args.baselines)
        print(f"seeded {report['baselines_seeded']} baselines from {args.baselines}", flush=True)
    print(f"{n} {'GPU' if load.device == 'cuda' else 'CPU slot'}(s) {load.slots}; load {len(load.candidates)} x "
          f"{args.repeats}; {args.build_workers} build workers; plan {report['plan']}", flush=True)  # fmt: skip
    save(report, args.out)
    for i, (step, k, weight) in enumerate(steps):
        limit_s = max(0.0, deadline - time.monotonic()) * weight / sum(w for _, _, w in steps[i:])
        print(f"== {step} k={k}: up to {limit_s:.0f} s", flush=True)
        if step == "cold":
            row, _ = run_step("local", k, load, load.jobs(1), limit_s, args)
            report["cold"] = row | {"step": "cold", "cache": "cold: builds (and unseeded baselines) made here"}
        elif step == "agreement":
            row = report["agreement"] = agreement(load, args, limit_s)
        else:
            row, _ = run_step(step, k, load, load.jobs(args.repeats), limit_s, args)
            report["runs"].append(row | {"cache": "warm: builds cached by the cold round"})
            report["scaling"] = scaling(report["runs"])
        summary = {key: row.get(key) for key in ("per_hour", "answered", "jobs", "counts_ok", "cut_by_budget")}
        extra = {key: row[key] for key in ("median_ms", "max_over_min", "failed") if key in row}
        print(f"== {step} k={k} done in {row.get('step_s')} s: {summary} {extra}", flush=True)
        report["counts_ok_everywhere"] = all(
            r.get("counts_ok") for r in [report.get("cold", {}), report.get("agreement", {}), *report["runs"]] if r
        )
        save(report, args.out)
    _shutdown_ray()
    report["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    save(report, args.out)
    if args.out is not None:
        runs = {f"{r.get('pool')} k={r.get('k')}": r for r in report["runs"]}
        sections = {"agreement": report.get("agreement", {}), **runs}
        title = "Sandbox pools across GPUs: judgements per hour, counts, agreement"
        write_summary(args.out.parent, "multi_gpu_summary", title, sections, " ".join(sys.argv))
    print(json.dumps({"scaling": report.get("scaling"), "counts_ok_everywhere": report["counts_ok_everywhere"],
                      "agreement": {k: report["agreement"].get(k) for k in ("median_ms", "max_over_min")}},
                     indent=1), flush=True)  # fmt: skip
    agreement_ok = load.device != "cuda" or report["agreement"].get("within_2_percent", False)
    return 0 if report["counts_ok_everywhere"] and agreement_ok else 1


def _shutdown_ray() -> None:
    if "ray" in sys.modules:
        import ray

        if ray.is_initialized():
            ray.shutdown()


if __name__ == "__main__":
    sys.exit(main())
