"""bench/work_dir.sh: the GPU bench scripts delete no fixed folder under /tmp that they did not make."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _work_dir(name: str, env: dict[str, str]) -> Path:
    done = subprocess.run(
        ["bash", "-c", f". bench/work_dir.sh && work_dir {name}"],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "WORK"} | env,
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(done.stdout.strip())


def test_without_work_a_new_folder_is_made_and_a_fixed_one_is_left_alone(tmp_path: Path) -> None:
    fixed = tmp_path / "chain_gpu"  # the folder the scripts once wiped whatever it held
    fixed.mkdir()
    (fixed / "someone_elses.txt").write_text("keep me")
    first, second = (_work_dir("chain_gpu", {"TMPDIR": str(tmp_path)}) for _ in range(2))
    assert first.is_dir() and second.is_dir() and len({first, second, fixed}) == 3
    assert first.parent == tmp_path and first.name.startswith("chain_gpu.")
    assert (fixed / "someone_elses.txt").read_text() == "keep me"


def test_work_given_is_used_and_emptied(tmp_path: Path) -> None:
    work = tmp_path / "mine"
    work.mkdir()
    (work / "old.log").write_text("from the last run")
    assert _work_dir("learning_gpu", {"WORK": str(work)}) == work
    assert work.is_dir() and list(work.iterdir()) == []


@pytest.mark.parametrize("script", ["chain_gpu.sh", "learning_gpu.sh"])
def test_the_gpu_scripts_take_their_folder_from_work_dir(script: str) -> None:
    text = (ROOT / "bench" / script).read_text()
    assert re.search(r"^\. bench/work_dir\.sh && WORK=\$\(work_dir \w+\)", text, re.M)
    assert not re.search(r"WORK=\$\{WORK:-/tmp|rm -rf \"?\$WORK", text)
