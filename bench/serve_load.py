"""Load test of the reward service: `cuda-agent serve` on loopback, many concurrent clients.

Sends a mix of good, broken and hostile solutions (all variants of the bundled relu example, so
they share one cached build) from `--clients` threads, each request with its own id, and records
throughput, p50/p99 latency and the verdict mix. It fails (exit 1) unless every id sent came back
exactly once (count in = count out, by id) and every verdict is the expected one.

Usage (CPU, a few minutes on 2 cores):
    python bench/serve_load.py --jobs 40 --clients 8 --workers 2 --out OUT/serve_load.json
On a GPU machine add `--device cuda` (the CUDA relu example is used and jobs take the GPU's timing slot).
Beside the report: the summary, serve_load_summary.json and .md (throughput, latency percentiles, counts).
"""

from __future__ import annotations

import argparse
import collections
import json
import platform
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.summary import write_summary  # noqa: E402
from cuda_agent.sandbox.stats import percentile  # noqa: E402
from tests.judge.helpers import example_solution, with_forward_body  # noqa: E402


def mix(device: str) -> list[tuple[str, str, dict, str]]:
    """(kind, solution, extra config, expected verdict) for each kind of candidate."""
    good = example_solution("relu", device)
    runtime = {"static_policy": False}
    return [
        ("good", good, {}, "pass"),
        ("good", good, {}, "pass"),
        ("broken_forward", with_forward_body(good, "return relu_ext.relu_forward(x, 3)"), {}, "runtime_error"),
        ("torch_fallback", with_forward_body(good, "return torch.relu(x)"), {}, "rejected"),
        ("hostile_os_exit", with_forward_body(good, "import os\nos._exit(0)"), runtime, "runtime_error"),
        (
            "hostile_infinite_loop",
            with_forward_body(good, "while True:\n    pass"),
            {**runtime, "run_timeout_s": 8.0},
            "timeout",
        ),
        (
            "hostile_memory_hog",
            with_forward_body(good, "hog = [bytearray(2**28) for _ in range(4096)]\nreturn x"),
            runtime,
            "runtime_error",
        ),
    ]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_service(port: int, workers: int) -> subprocess.Popen:
    # 4 GiB of address space per process: the memory hogs stop there, not at this machine's RAM.
    cmd = [sys.executable, "-m", "cuda_agent", "serve", "--port", str(port), "--workers", str(workers)]
    cmd += ["--address-space-gb", "4"]
    proc = subprocess.Popen(cmd, cwd=ROOT)
    for _ in range(150):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("the service did not come up")


def client(url: str, todo: collections.deque, lock: threading.Lock, answers: list, args: argparse.Namespace) -> None:
    with httpx.Client(base_url=url, timeout=3600) as http:
        while True:
            with lock:
                if not todo:
                    return
                job_id, kind, solution, extra, expected = todo.popleft()
            config = {"time": args.time, "trials": 2, "robustness_trials": False, "device": args.device, **extra}
            config.setdefault("verdict_cache", False)  # the load is judging, not verdict-cache answers
            body = {"id": job_id, "task": "examples/relu", "solution": solution, "config": config}
            start = time.monotonic()
            response = http.post("/judge", json=body)
            latency = time.monotonic() - start
            payload = response.json()
            verdict = payload.get("verdict", f"http_{response.status_code}")
            with lock:
                answers.append((response.headers.get("x-job-id"), job_id, kind, expected, verdict, latency))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2, help="build workers of the served local pool")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--time", action="store_true", help="time the good candidates (default: correctness only)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    kinds = mix(args.device)
    jobs = [(uuid.uuid4().hex, *kinds[i % len(kinds)]) for i in range(args.jobs)]
    port = free_port()
    service = start_service(port, args.workers)
    url = f"http://127.0.0.1:{port}"
    todo, lock, answers = collections.deque(jobs), threading.Lock(), []
    start = time.monotonic()
    threads = [threading.Thread(target=client, args=(url, todo, lock, answers, args)) for _ in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall_s = time.monotonic() - start
    metrics = httpx.get(f"{url}/metrics").json()
    service.terminate()
    service.wait(timeout=60)
    return report(args, jobs, answers, wall_s, metrics)


def report(args: argparse.Namespace, jobs: list, answers: list, wall_s: float, metrics: dict) -> int:
    sent = collections.Counter(job[0] for job in jobs)
    returned = collections.Counter(a[0] for a in answers)
    lost = [job_id for job_id in sent if returned[job_id] == 0]
    twice = [job_id for job_id, n in returned.items() if n > 1]
    unexpected = [(a[2], a[3], a[4]) for a in answers if a[3] != a[4]]
    mismatched_ids = [a for a in answers if a[0] != a[1]]
    latencies = [a[5] for a in answers]
    result = {
        "jobs": len(jobs),
        "answers": len(answers),
        "lost": lost,
        "answered_twice": twice,
        "header_id_mismatch": len(mismatched_ids),
        "unexpected_verdicts": unexpected,
        "wall_s": round(wall_s, 2),
        "throughput_jobs_per_min": round(60 * len(answers) / wall_s, 2),
        "latency_s": {q: round(percentile(latencies, int(q[1:])), 2) for q in ("p50", "p90", "p99")},
        "verdicts_by_kind": {
            kind: dict(collections.Counter(a[4] for a in answers if a[2] == kind))
            for kind in sorted({a[2] for a in answers})
        },
        "service_metrics": metrics,
        "settings": vars(args) | {"out": str(args.out)},
        "machine": {
            "cpus": __import__("os").cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
        counts = {"lost": len(lost), "answered_twice": len(twice), "unexpected_verdicts": len(unexpected)}
        sections = {"load": {**result["settings"], "wall_s": result["wall_s"]}, "latency_s": result["latency_s"]}
        sections["answers"] = {"jobs": len(jobs), "answers": len(answers), **counts}
        sections["answers"]["throughput_jobs_per_min"] = result["throughput_jobs_per_min"]
        title, command = "Reward service under load", " ".join(sys.argv)
        write_summary(args.out.parent, "serve_load_summary", title, sections, command)
    ok = not lost and not twice and not mismatched_ids and not unexpected and len(answers) == len(jobs)
    print("OK: count in = count out by id" if ok else "FAILED", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
