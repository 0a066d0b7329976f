"""How fast a repeated candidate is answered from the verdict cache (issue 20, item 6).

Judges one candidate afresh (its build and baselines may be cached; its verdict is not: the task gets
a comment no earlier run used), then asks again in-process `--reps` times, then through the CLI
(`cuda-agent judge --json`, a fresh process each) `--cli-reps` times. Writes a JSON report.

    python bench/verdict_cache.py --device cpu --out bench/results/cpu-2026-12-04/verdict_cache.json
    python bench/verdict_cache.py --device cuda --task kernelbench/L1/19 --solution solutions/kernelbench/L1/19.py \
        --out /tmp/out/verdict_cache.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cuda_agent.judge import JudgeConfig, judge  # noqa: E402
from cuda_agent.tasks import Catalog  # noqa: E402

RELU = ROOT / "cuda_agent" / "tasks" / "examples" / "solutions"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--task", default="examples/relu")
    parser.add_argument("--solution", type=Path, default=None, help="default: the bundled relu for the device")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--cli-reps", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    solution = args.solution or RELU / args.device / "relu.py"
    base = Catalog().resolve(args.task)
    # A task source no earlier run judged: a verdict key of its own (builds depend on the solution only).
    task = base.model_copy(update={"code": f"{base.code}\n# verdict-cache bench {uuid.uuid4().hex}\n"})
    config = JudgeConfig(device=args.device)
    start = time.perf_counter()
    first = judge(task, solution, config)
    fresh_s = time.perf_counter() - start
    cached_s, flags = [], []
    for _ in range(args.reps):
        start = time.perf_counter()
        again = judge(task, solution, config)
        cached_s.append(time.perf_counter() - start)
        flags.append(again.env["verdict_cached"])
    with tempfile.TemporaryDirectory() as tmp:
        task_file = Path(tmp) / "task.py"
        task_file.write_text(task.code)
        cli_s, cli_flags = [], []
        for _ in range(args.cli_reps):
            argv = [sys.executable, "-m", "cuda_agent", "judge", str(task_file), str(solution), "--device", args.device]
            start = time.perf_counter()
            proc = subprocess.run([*argv, "--json"], capture_output=True, text=True, check=True, cwd=ROOT)
            cli_s.append(time.perf_counter() - start)
            cli_flags.append(json.loads(proc.stdout)["env"]["verdict_cached"])
    report = {
        "command": " ".join(sys.argv),
        "machine": f"{platform.node()} ({platform.processor() or platform.machine()}), device {args.device}",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "task": args.task,
        "solution": str(solution),
        "verdict": first.verdict,
        "fresh_judgement_s": round(fresh_s, 3),
        "fresh_stage_s": first.stage_s,
        "cached_in_process_s": {"median": statistics.median(cached_s), "max": max(cached_s), "n": len(cached_s)},
        "cached_in_process_all_marked": all(flags),
        "cached_cli_process_s": {"median": statistics.median(cli_s), "max": max(cli_s), "n": len(cli_s)},
        "cached_cli_all_marked": all(cli_flags),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
