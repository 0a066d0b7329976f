"""bench/learning_gpu.sh (the curriculum's learning run) returns what it did when it is stopped part-way.

On the H200 the device's time limit killed a run in its SFT stage and nothing came back: the script packed its
results only at the end (2026-12-05). Here the real script runs on the CPU and is stopped while SFT trains.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.integration
def test_a_run_stopped_during_sft_packs_its_results_and_leaves_no_process(tmp_path: Path) -> None:
    pytest.importorskip("verl")
    env = {
        **os.environ,
        "DEVICE": "cpu",
        "STEPS": "1",
        "SEEDS": "0",
        "SFT_STEPS": "400",  # far more than run before the stop
        "SFT_BATCH": "3",
        "N": "2",
        "OUT": str(tmp_path / "out"),
        "WORK": str(tmp_path / "work"),
        "PY": sys.executable,
        "PORT": str(_free_port()),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    proc = subprocess.Popen(
        ["bash", "bench/learning_gpu.sh"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            # The 30-second progress line, once it counts a finished step (on a busy machine the first line may come
            # before SFT's first step has written its metrics file).
            if line.startswith("== SFT at") and not re.search(r": 0/\d+ steps", line):
                break
        else:
            pytest.fail("the script ended before SFT reported progress:\n" + "".join(seen[-20:]))
        proc.send_signal(signal.SIGTERM)  # as a time limit would stop it
        rest, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 143, rest[-2000:]
    assert "== signalled" in rest
    with tarfile.open(tmp_path / "out" / "learning_gpu.tar") as tar:
        names = set(tar.getnames())
    assert {"./learning_gpu.log", "./sft/train.log", "./sft/metrics.0.jsonl"} <= names, names
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True).stdout
    assert [line for line in ps.splitlines() if str(tmp_path) in line] == []  # torchrun's workers included
