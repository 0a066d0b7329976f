"""The benchmarks' `--sandbox serve` mode (bench/served.py): a `cuda-agent serve --spares N` started beside the
run judges what the local path judges, and nothing of it outlives the benchmark.

The benchmark runs under a child subreaper (prctl PR_SET_CHILD_SUBREAPER): whatever it or its service leaves
running is re-parented to that wrapper instead of init, so the wrapper sees every such process, spares (which
run in sessions of their own) included.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

UNDER_SUBREAPER = """
import ctypes, json, os, signal, subprocess, sys, time
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
term_at, argv = sys.argv[1], sys.argv[2:]  # term_at: SIGTERM the benchmark once a process of it names this
bench = subprocess.Popen(argv)
def below_bench(pid):
    while pid > 1:
        pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        if pid == bench.pid:
            return True
    return False
while term_at and bench.poll() is None:
    named = False
    for pid in os.listdir("/proc"):
        try:
            cmdline = open(f"/proc/{pid}/cmdline").read().replace("\\0", " ")
            named = named or term_at in cmdline and below_bench(int(pid))
        except (OSError, ValueError):
            pass
    if named:
        bench.send_signal(signal.SIGTERM)  # as `timeout` in bench/device/judge_gpu.sh stops a part
        break
    time.sleep(0.2)
code = bench.wait()
while True:  # reap what ended (a zombie is no live process)
    try:
        if os.waitpid(-1, os.WNOHANG) == (0, 0):
            break
    except ChildProcessError:
        break
left = []
for stat in os.listdir("/proc"):
    try:
        fields = open(f"/proc/{stat}/stat").read().rsplit(")", 1)[1].split()
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            left.append(open(f"/proc/{stat}/cmdline").read().replace("\\0", " "))
    except (OSError, ValueError):
        pass
print(json.dumps({"code": code, "left": left}))
"""


def run_left(argv: list[str], timeout_s: float, term_at: str = "") -> tuple[int, list[str]]:
    """Run `argv` to its end (SIGTERM once a process whose command line names `term_at` runs, if given); its
    exit code and the command lines of whatever it left running."""
    done = subprocess.run(
        [sys.executable, "-c", UNDER_SUBREAPER, term_at, *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return report["code"], report["left"]


@pytest.mark.integration
@pytest.mark.slow
def test_judge_bench_through_a_serve_gives_the_local_verdicts_and_leaves_no_process(tmp_path: Path) -> None:
    argv = [sys.executable, "bench/judge_latency.py", "--parts", "B", "--sandbox", "serve", "--device", "cpu"]
    code, left = run_left([*argv, "--repeat", "2", "--out", str(tmp_path)], timeout_s=900)
    assert code == 0
    assert left == []  # the serve, its pool's runners and its spares all ended with the benchmark
    result = json.loads((tmp_path / "judge_latency_B.json").read_text())
    local, served = result["local"]["rows"], result["serve"]["rows"]
    assert len(local) == len(served) == 2
    assert [r["verdict"] for r in local] == [r["verdict"] for r in served] == ["pass", "pass"]
    assert [r["correct"] for r in served] == [True, True] and result["verdicts_equal"]
    assert all(r["exit"] == 0 for r in local + served)
    # Judged by the service (a spare it started ahead), not in the CLI's own process.
    assert [r["standby_worker"] for r in served] == ["spare started ahead"] * 2
    assert {r["standby_worker"] for r in local} == {"started ahead"}
    assert result["serve_left"] == []


@pytest.mark.integration
def test_a_served_bench_stopped_by_sigterm_stops_its_serve_and_the_spares(tmp_path: Path) -> None:
    argv = [sys.executable, "bench/judge_latency.py", "--parts", "B", "--sandbox", "serve", "--device", "cpu"]
    # A spare runner runs once the served warm-up judgement has taken the timing slot: then the SIGTERM.
    code, left = run_left(
        [*argv, "--repeat", "3", "--out", str(tmp_path)], timeout_s=600, term_at="cuda_agent.sandbox.runner --spare"
    )
    assert code == 143  # stopped, not finished
    assert left == []
    assert not (tmp_path / "judge_latency_B.json").exists()
