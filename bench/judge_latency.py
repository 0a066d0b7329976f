"""The judge's latency and throughput: GPU-slot seconds, CLI wall, concurrent judges, a hang, steady pool throughput.

Parts (each writes `<part>.json` under --out and prints one summary line; run them in this order, since
B-D use the build and baselines that A leaves in the cache):

  A  lone: `cuda-agent judge TASK SOLUTION --json` once, cold (its build and baselines), and again with
     caches: the verdict every concurrent one must equal.
  B  cached: `--repeat` CLI judgements with build and baselines cached (verdict cache off): wall (target
     <= 7 s on the H200) and GPU-slot seconds (the candidate's exclusive GPU turn, `stage_s["gpu_held.run"]`;
     target <= 5 s), with the run's steps. With `--sandbox serve`: a `cuda-agent serve --spares N` is started
     for it, and each round judges the same candidate twice, in the CLI's own process and through
     `cuda-agent judge --sandbox URL` (after a first served judgement that is not counted), both reported.
  C  concurrent: 2, then 4 CLI judgements at once: every one must equal the lone verdict (and pass).
  D  hang: a candidate whose C++ spins with the GIL held: `timeout` within 60 s of its start.
  F  pool: `--n` distinct candidates with cold builds (legit, incorrect, compile errors, rejected, one
     hang) through LocalPool within `--pool-s` seconds: judgements/hour, and the busy fractions of the
     GPU turn, the GPU slots and the build workers.

    python bench/judge_latency.py --parts A,B,C,D,F --device cuda --out OUT     # a GPU (bench/device/judge_gpu.sh)
    python bench/judge_latency.py --parts A,B,C,D,F --device cpu --out OUT --n 12 --pool-s 240   # CPU variant
    python bench/judge_latency.py --parts B --sandbox serve --device cpu --out OUT    # B: local and served

Writes `judge_latency_<part>.json` per part, and the summary of every part run: `judge_latency.json` and `.md`.

On the CPU the task is examples/relu and its bundled solution (KernelBench sizes do not fit a CPU run).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.served import add_serve_arguments, served, stop_on_sigterm  # noqa: E402
from bench.summary import write_summary  # noqa: E402

TARGETS = {
    "cuda": ("kernelbench/L1/19", REPO / "solutions/kernelbench/L1/19.py"),
    "cpu": ("examples/relu", REPO / "cuda_agent/tasks/examples/solutions/cpu/relu.py"),
}
POOL_SOLUTIONS = {
    "cuda": {f"kernelbench/L1/{n}": REPO / f"solutions/kernelbench/L1/{n}.py" for n in (1, 19, 20, 21, 23, 26, 47)},
    "cpu": {
        f"examples/{n}": REPO / f"cuda_agent/tasks/examples/solutions/cpu/{n}.py"
        for n in ("relu", "scale_add", "softmax", "row_sum")
    },
}
# What makes a variant wrong: a changed result in the elementwise kernels' vector path (L1/19-26) or the CPU relu.
WRONG_EDITS = [("v.w = op(v.w);", "v.w = op(v.w) + {k}.5f;"), ("dst[i] = v < 0.0f ? 0.0f : v;", "dst[i] = v + {k}.5f;")]
ENTRY = re.compile(r"^torch::Tensor \w+\([^)]*\) \{$", re.MULTILINE)
SPIN = "    { volatile long long spin = 0; while (spin >= 0) { spin = spin + 1; if (spin > (1LL << 62)) spin = 0; } }\n"


def _cli(task: str, solution: Path, device: str, *extra: str, timeout_s: float = 900) -> dict:
    """One `cuda-agent judge --json` in a fresh process: its verdict, wall seconds and exit code."""
    argv = [sys.executable, "-m", "cuda_agent", "judge", task, str(solution), "--device", device, "--json", *extra]
    env = {k: v for k, v in os.environ.items() if k != "CUDA_AGENT_SANDBOX_URL"}  # served only with --sandbox
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, cwd=REPO, env=env)
    wall = time.monotonic() - start
    row: dict = {"wall_s": round(wall, 2), "exit": proc.returncode}
    try:
        verdict = json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return row | {"error": (proc.stderr or proc.stdout).strip()[-600:]}
    stage = verdict.get("stage_s", {})
    return row | {
        "verdict": verdict["verdict"],
        "reward": verdict["reward"],
        "correct": verdict["correct"],
        "message": verdict["message"][:300],
        "gpu_held_s": stage.get("gpu_held.run"),  # the candidate's turn (a cold judgement's baselines aside)
        "gpu_wait_s": stage.get("gpu_wait"),
        "stage_s": {k: round(v, 3) for k, v in stage.items()},
        "run_limits": verdict["env"].get("run_limits"),
        "standby_worker": verdict["env"].get("standby_worker"),
        "timings_ms": verdict["timings_ms"],
    }


def _same(row: dict, lone: dict) -> bool:
    """The same verdict and correctness (the reward also depends on the measured times; reported beside it)."""
    return (row.get("verdict"), row.get("correct")) == (lone.get("verdict"), lone.get("correct"))


def part_a(device: str, out: Path) -> dict:
    task, solution = TARGETS[device]
    cold = _cli(task, solution, device, "--no-verdict-cache")
    lone = _cli(task, solution, device, "--no-verdict-cache")
    print(f"A lone: cold {cold.get('verdict')} {cold['wall_s']} s; cached {lone.get('verdict')} {lone['wall_s']} s")
    return {"task": task, "cold": cold, "lone": lone}


SPLIT = ("sandbox.prepare", "sandbox.prepare.runner", "sandbox.slot_wait", "sandbox.judge", "sandbox.judge.runner")
"""A served judgement's seconds in the pool (sandbox/execution.note_stage): each stage's runner, and its part
outside the judge's call."""


def _medians(rows: list[dict]) -> dict:
    held = [r["gpu_held_s"] for r in rows if r.get("gpu_held_s") is not None]
    split = {}
    for key in ("run", *SPLIT):
        seen = [r["stage_s"][key] for r in rows if key in r.get("stage_s", {})]
        if seen:
            split[key] = round(statistics.median(seen), 3)
    pooled = [r for r in rows if "sandbox.judge" in r.get("stage_s", {})]
    if pooled:  # the CLI's own process, the HTTP round trip and the service's handling
        outside = [
            r["wall_s"] - sum(r["stage_s"].get(k, 0.0) for k in SPLIT if not k.endswith(".runner")) for r in pooled
        ]
        split["outside_pool"] = round(statistics.median(outside), 3)
    return {
        "wall_s_median": statistics.median(r["wall_s"] for r in rows),
        "gpu_held_s_median": statistics.median(held) if held else None,
        "split_s_median": split,
    }


def part_b(device: str, out: Path, repeat: int) -> dict:
    task, solution = TARGETS[device]
    rows = [_cli(task, solution, device, "--no-verdict-cache") for _ in range(repeat)]
    summary = _medians(rows) | {"targets": {"wall_s": 7.0, "gpu_held_s": 5.0}}
    print(f"B cached CLI: wall median {summary['wall_s_median']} s, GPU-slot s median {summary['gpu_held_s_median']}")
    return {"task": task, "rows": rows, **summary}


def part_b_served(device: str, out: Path, repeat: int, spares: int) -> dict:
    """Part B in the CLI's own process and through a `cuda-agent serve --spares N`, round by round."""
    task, solution = TARGETS[device]
    rows: dict[str, list[dict]] = {"local": [], "serve": []}
    with served(spares, log=out / "serve_B.log") as service:
        # The service's first judgement starts its spares (a pool without a GPU starts none before) and reads
        # the caches A left: not counted, as A's cold judgement is not.
        warm_up = _cli(task, solution, device, "--no-verdict-cache", "--sandbox", service.url)
        for _ in range(repeat):
            for way, extra in (("local", ()), ("serve", ("--sandbox", service.url))):
                settle_s = service.wait_idle()  # its next spare is started, as after a user's pause
                rows[way].append(_cli(task, solution, device, "--no-verdict-cache", *extra) | {"settle_s": settle_s})
    summary = {way: _medians(rows[way]) for way in rows}
    lone = rows["local"][0]
    equal = all(_same(r, lone) for r in rows["local"] + rows["serve"])
    print(
        f"B cached CLI: wall median local {summary['local']['wall_s_median']} s, served "
        f"{summary['serve']['wall_s_median']} s; GPU-slot s median local {summary['local']['gpu_held_s_median']}, "
        f"served {summary['serve']['gpu_held_s_median']}; verdicts equal: {equal}; "
        f"served by a spare: {[r.get('standby_worker') for r in rows['serve']]}; serve processes left: {service.left}"
    )
    print(f"B served, where the seconds went (medians): {summary['serve']['split_s_median']}")
    return {
        "task": task,
        "sandbox": "serve",
        "spares": spares,
        "warm_up": warm_up,
        **{way: {"rows": rows[way], **summary[way]} for way in rows},
        "verdicts_equal": equal,
        "serve_left": service.left,
        "targets": {"wall_s": 7.0, "gpu_held_s": 5.0},
    }


def part_c(device: str, out: Path, lone: dict) -> dict:
    task, solution = TARGETS[device]
    rounds = {}
    for n in (2, 4):
        start = time.monotonic()
        with ThreadPoolExecutor(n) as pool:
            rows = list(pool.map(lambda _: _cli(task, solution, device, "--no-verdict-cache"), range(n)))
        rounds[str(n)] = {
            "wall_s": round(time.monotonic() - start, 2),
            "rows": rows,
            "all_equal_lone": all(_same(r, lone) for r in rows),
            "same_reward_as_lone": [r.get("reward") == lone.get("reward") for r in rows],
            "solution_ms": [r.get("timings_ms", {}).get("solution") for r in rows],
            "all_pass": all(r.get("verdict") == "pass" for r in rows),
        }
        print(
            f"C {n} at once: {[(r.get('verdict'), r.get('reward')) for r in rows]} verdicts equal to lone "
            f"({lone.get('verdict')}, reward {lone.get('reward')}): {rounds[str(n)]['all_equal_lone']}"
        )
    return {"task": task, "lone": lone, "rounds": rounds}


def hang_variant(source: str) -> str:
    """The solution with a host-side spin at the start of its C++ entry point (it never releases the GIL)."""
    match = ENTRY.search(source)
    assert match, "no C++ entry point found"
    return source[: match.end() + 1] + SPIN + source[match.end() + 1 :]


def part_d(device: str, out: Path) -> dict:
    task, solution = TARGETS[device]
    path = out / "hang_candidate.py"
    path.write_text(hang_variant(solution.read_text()))
    row = _cli(task, path, device, "--no-verdict-cache")
    # From the candidate's start (its process got the request in our GPU turn) to its kill: the turn it held.
    stage = row.get("stage_s", {})
    # The CPU has no GPU turn: the run stage after its worker was ready (it got the request then).
    held = row.get("gpu_held_s") or (stage.get("run", 1e9) - stage.get("run.standby_ready", 0.0))
    print(f"D hang: {row.get('verdict')} {held} s after it started (wall {row['wall_s']} s), {row.get('run_limits')}")
    return {"task": task, "row": row, "timeout_within_60_s": row.get("verdict") == "timeout" and (held or 1e9) <= 60}


def variants(device: str, n: int, salt: str) -> list[tuple[str, str, str]]:
    """`n` distinct candidates (task, kind, source): about 40% legit, 20% wrong, 20% compile errors, 20% rejected,
    and one hang first (its limit is the longest). Each differs in code the compiler sees, so each builds cold."""
    sources = {task: path.read_text() for task, path in POOL_SOLUTIONS[device].items()}
    wrongable = [(t, s, e) for t, s in sources.items() for e in WRONG_EDITS if e[0] in s]
    hang_task = next(t for t, s in sources.items() if ENTRY.search(s) and t == TARGETS[device][0])
    out = [(hang_task, "hang", _mark(hang_variant(sources[hang_task]), f"{salt}h"))]
    tasks = list(sources)
    for k in range(1, n):
        task = tasks[k % len(tasks)]
        source, mark = sources[task], f"{salt}{k}"
        kind = ("legit", "legit", "wrong", "compile_error", "rejected")[k % 5]
        if kind == "wrong":
            task, source, (old, new) = wrongable[k % len(wrongable)]
            out.append((task, kind, _mark(source.replace(old, new.format(k=k % 7 + 1)), mark)))
        elif kind == "compile_error":
            out.append((task, kind, _mark(source, mark, f'static_assert(sizeof(int) == {k + 100}, "{mark}");\n')))
        elif kind == "rejected":
            fallback = f"import subprocess  # {mark}: reaching the OS is forbidden\n"
            out.append((task, kind, fallback + _mark(source, mark)))
        else:
            out.append((task, kind, _mark(source, mark)))
    return out


def _mark(source: str, mark: str, extra: str = "") -> str:
    """A constant the compiler must compile (a comment would be stripped before the compiler cache's key)."""
    at = source.index("#include <torch/extension.h>\n") + len("#include <torch/extension.h>\n")
    return source[:at] + f"static const int bench_variant_{mark} = {len(mark)};\n" + extra + source[at:]


def part_f(device: str, out: Path, n: int, pool_s: float, build_workers: int | None) -> dict:
    from cuda_agent.sandbox.jobs import make_judge_job
    from cuda_agent.sandbox.local import LocalPool

    salt = f"r{int(time.time()) % 100000}"
    candidates = variants(device, n, salt)
    start = time.monotonic()
    rows: list[dict] = []

    def collect(kind: str, future) -> None:  # called as each job completes, in completion order
        result = future.result()
        verdict = result.verdict
        rows.append(
            {
                "kind": kind,
                "status": result.status,
                "verdict": verdict.verdict if verdict else None,
                "done_at_s": round(time.monotonic() - start, 2),
                "run_s": round(result.run_s, 2),
                "gpu_held_s": verdict.stage_s.get("gpu_held") if verdict else None,  # baselines too
                "run_stage_s": verdict.stage_s.get("run") if verdict else None,
                # a task's first judgement measures its baselines: the stage's wall, and the GPU held alone in it
                "baselines_s": verdict.stage_s.get("baselines") if verdict else None,
                "baselines_gpu_held_s": verdict.stage_s.get("gpu_held.baselines") if verdict else None,
                "error": (result.error or "")[:200],
            }
        )

    with LocalPool(build_workers=build_workers) as pool:
        futures = []
        for task, kind, source in candidates:
            job = make_judge_job(task, source, {"device": device, "verdict_cache": False})
            future = pool.submit(job)
            future.add_done_callback(lambda f, kind=kind: collect(kind, f))
            futures.append(future)
        while time.monotonic() - start < pool_s and not all(f.done() for f in futures):
            time.sleep(0.5)
        elapsed = time.monotonic() - start
        metrics = pool.metrics()
        answered = list(rows)  # what closing the pool cancels next is not counted
    done = [r for r in answered if r["status"] == "done"]
    # Each task's first judgement times its baselines (torch.compile): the second half is the steady state.
    late = [r for r in done if r["done_at_s"] > elapsed / 2]
    held = sum(r["gpu_held_s"] or 0 for r in done)
    by_kind: dict = {}
    for r in answered:
        by_kind.setdefault(r["kind"], {}).setdefault(str(r["verdict"] or r["status"]), 0)
        by_kind[r["kind"]][str(r["verdict"] or r["status"])] += 1
    workers = metrics.workers
    summary = {
        "candidates": len(candidates),
        "answered": len(answered),
        "elapsed_s": round(elapsed, 1),
        "judgements_per_hour": round(len(done) / elapsed * 3600, 1) if elapsed else None,
        "second_half_per_hour": round(len(late) / (elapsed / 2) * 3600, 1) if elapsed else None,
        "gpu_turn_busy": round(held / elapsed, 3),
        "timing_slot_busy": round(metrics.busy_s.get("timing", 0) / elapsed / max(workers.get("timing", 1), 1), 3),
        "build_worker_busy": round(metrics.busy_s.get("build", 0) / elapsed / max(workers.get("build", 1), 1), 3),
        "workers": workers,
        "verdicts_by_kind": by_kind,
        "hang": next((r for r in answered if r["kind"] == "hang"), None),
        "baselines_measured": [
            {"s": r["baselines_s"], "gpu_held_s": r["baselines_gpu_held_s"]} for r in done if r["baselines_s"]
        ],
    }
    print(
        f"F pool: {summary['answered']}/{len(candidates)} answered in {summary['elapsed_s']} s -> "
        f"{summary['judgements_per_hour']}/h (second half {summary['second_half_per_hour']}/h); busy GPU {summary['gpu_turn_busy']}, slots {summary['timing_slot_busy']}, "
        f"builds {summary['build_worker_busy']}; {by_kind}"
    )
    return {**summary, "rows": answered}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="A,B,C,D,F")
    parser.add_argument("--device", choices=["cuda", "cpu"], required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=3, help="part B: cached CLI judgements")
    parser.add_argument("--n", type=int, default=100, help="part F: distinct candidates")
    parser.add_argument("--pool-s", type=float, default=200.0, help="part F: stop collecting after this long")
    parser.add_argument("--build-workers", type=int, default=None, help="part F: LocalPool build workers")
    parser.add_argument(
        "--task", nargs=2, metavar=("TASK", "SOLUTION"), help="parts A-C: this task and solution (default: L1/19's)"
    )
    add_serve_arguments(parser, "part B also judges through `cuda-agent judge --sandbox URL` (a serve started for it)")
    args = parser.parse_args()
    if args.task:
        TARGETS[args.device] = (args.task[0], Path(args.task[1]).resolve())
    stop_on_sigterm()  # a `timeout` still stops a service started for part B
    args.out.mkdir(parents=True, exist_ok=True)
    machine = {"device": args.device, "cpus": os.cpu_count(), "host": os.uname().nodename, "date": time.ctime()}
    lone: dict = {}
    sections: dict[str, dict] = {}
    for part in args.parts.split(","):
        start = time.monotonic()
        if part == "A":
            result = part_a(args.device, args.out)
            lone = result["lone"]
        elif part == "B" and args.sandbox == "serve":
            result = part_b_served(args.device, args.out, args.repeat, args.spares)
        elif part == "B":
            result = part_b(args.device, args.out, args.repeat)
        elif part == "C":
            saved = args.out / "judge_latency_A.json"
            if not lone:
                lone = (
                    json.loads(saved.read_text())["lone"] if saved.exists() else part_a(args.device, args.out)["lone"]
                )
            result = part_c(args.device, args.out, lone)
        elif part == "D":
            result = part_d(args.device, args.out)
        elif part == "F":
            result = part_f(args.device, args.out, args.n, args.pool_s, args.build_workers)
        else:
            raise SystemExit(f"unknown part {part!r}: use A, B, C, D, F")
        result |= {"part_s": round(time.monotonic() - start, 1), "machine": machine, "argv": sys.argv}
        (args.out / f"judge_latency_{part}.json").write_text(json.dumps(result, indent=1))
        sections[part] = result
        write_summary(args.out, "judge_latency", "Judge latency and throughput", sections, " ".join(sys.argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
