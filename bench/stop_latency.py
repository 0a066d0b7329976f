"""What it costs the grader to stop a candidate's process and read its outputs itself (issue 36, class c).

The judge's answer to work hidden in the shim's copy of the outputs (`cuda_agent/judge/child/outputs.py`): an answer
counts once every thread of the candidate's process is stopped (the outside view ends there), and the grader reads
the output bytes from the stopped process (`process_vm_readv`, the judge's own reader). This measures both on this
machine: a child that imports torch (its thread pool
started, as the shim's is), waits on a pipe, and holds a float32 output of N bytes; per round the parent sends
SIGSTOP, polls /proc until every thread is stopped, reads the output, and sends SIGCONT.

    python bench/stop_latency.py [--rounds 200] [--mib 1 4 16] [--out OUT]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.summary import write_summary  # noqa: E402
from cuda_agent.judge.child.outputs import read_process  # noqa: E402
from cuda_agent.judge.uids import threads_not_stopped  # noqa: E402

CHILD = """
import sys, torch
torch.set_num_threads(int(sys.argv[2]))
x = torch.randn(int(sys.argv[1]) // 4)
torch.relu(x)  # the intra-op pool started
print(x.data_ptr(), flush=True)
sys.stdin.read()
"""


def measure(nbytes: int, rounds: int, threads: int) -> dict[str, float]:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(nbytes), str(threads)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    address = int(child.stdout.readline())
    buffer = bytearray(nbytes)
    ours = ctypes.addressof(ctypes.c_char.from_buffer(buffer))
    stop_us, read_us, cont_us = [], [], []
    try:
        for _ in range(rounds):
            start = time.perf_counter()
            os.kill(child.pid, signal.SIGSTOP)
            while threads_not_stopped([child.pid]):
                pass
            stopped = time.perf_counter()
            got = read_process(child.pid, [(address, ours, nbytes)])
            if got != nbytes:
                raise OSError(f"process_vm_readv read {got} of {nbytes} bytes")
            read = time.perf_counter()
            os.kill(child.pid, signal.SIGCONT)
            cont_us.append((time.perf_counter() - read) * 1e6)
            stop_us.append((stopped - start) * 1e6)
            read_us.append((read - stopped) * 1e6)
            time.sleep(0.002)
    finally:
        child.kill()
        child.wait()
    return {
        "stop_us_median": statistics.median(stop_us),
        "stop_us_p90": statistics.quantiles(stop_us, n=10)[-1],
        "read_us_median": statistics.median(read_us),
        "read_gb_s": nbytes / (statistics.median(read_us) * 1e-6) / 1e9,
        "cont_us_median": statistics.median(cont_us),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--mib", type=float, nargs="+", default=[1.0, 4.0, 16.0])
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="the child's torch threads")
    parser.add_argument("--out", type=Path, default=None, help="write stop_latency.json and .md here")
    args = parser.parse_args()
    sections = {}
    print("| output MiB | stop, median us | stop, p90 us | read, median us | read GB/s | SIGCONT us |")
    print("|---|---|---|---|---|---|")
    for mib in args.mib:
        row = sections[f"{mib:g} MiB"] = measure(int(mib * 2**20), args.rounds, args.threads)
        print(
            f"| {mib:g} | {row['stop_us_median']:.0f} | {row['stop_us_p90']:.0f} | {row['read_us_median']:.0f} "
            f"| {row['read_gb_s']:.2f} | {row['cont_us_median']:.0f} |"
        )
    if args.out is not None:
        command = "python bench/stop_latency.py " + " ".join(sys.argv[1:])
        write_summary(
            args.out, "stop_latency", "Stopping a candidate's process and reading its outputs", sections, command
        )


if __name__ == "__main__":
    main()
