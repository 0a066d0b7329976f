"""Which lock folder a process takes its GPU turns in: one per physical GPU, however the GPU is named."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import cuda_agent
from cuda_agent import gpu_turns, machine
from cuda_agent.gpu_turns import GpuTurns, physical_gpu, turns_for

UUIDS = ("GPU-aaaa-1111", "GPU-bbbb-2222")


@pytest.mark.parametrize(
    ("visible", "expected"),
    [
        (None, UUIDS[0]),
        ("0", UUIDS[0]),
        ("1", UUIDS[1]),
        ("1,0", UUIDS[1]),
        ("GPU-bbbb-2222", UUIDS[1]),
        ("7", "index-7"),
    ],
)
def test_every_name_of_a_gpu_leads_to_its_uuid(visible: str | None, expected: str, monkeypatch) -> None:
    monkeypatch.setattr(gpu_turns, "gpu_uuids", lambda: UUIDS)
    assert physical_gpu(visible) == expected


def test_turns_live_in_the_cache_folder_per_gpu(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(gpu_turns, "gpu_uuids", lambda: UUIDS)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert turns_for(tmp_path).folder == tmp_path / "gpu-turns" / UUIDS[1]  # this process's own visible GPU
    assert turns_for(tmp_path, "0").folder == tmp_path / "gpu-turns" / UUIDS[0]  # a child's, named for it


def test_exclusive_turns_count_the_gpu_seconds_a_judgement_held(tmp_path: Path) -> None:
    turns = turns_for(tmp_path, "GPU-cccc")
    with turns.exclusive():
        time.sleep(0.2)
    with turns.shared():
        time.sleep(0.2)
    assert sorted(p.name for p in turns.folder.iterdir()) == ["gate", "gpu"]
    assert 0.2 <= turns.held_s < 0.35  # the exclusive turn only: shared turns hold nobody else off


def test_lock_folders_and_files_are_no_other_users_to_replace_whatever_the_umask(tmp_path: Path) -> None:
    # A lock file that someone deleted and made again is a second lock: two timings would run at once.
    old = os.umask(0)
    try:
        turns = turns_for(tmp_path, "GPU-dddd")
        with turns.exclusive():
            pass
    finally:
        os.umask(old)
    modes = {
        p.name: stat.S_IMODE(p.stat().st_mode) for p in [turns.folder.parent, turns.folder, *turns.folder.iterdir()]
    }
    assert modes == {"gpu-turns": 0o755, "GPU-dddd": 0o755, "gate": 0o644, "gpu": 0o644}


def test_a_judge_of_another_user_takes_turns_in_a_folder_root_made_and_cannot_replace_its_files() -> None:
    # The sandbox's workspace commands run the judge as its unprivileged user against root's cache.
    system = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")  # not ours, which may be in /root
    python = system if os.geteuid() == 0 else sys.executable
    if python is None:
        pytest.skip("no python3 that another user can run")
    with tempfile.TemporaryDirectory() as tmp:  # pytest's tmp_path is out of other users' reach
        Path(tmp).chmod(0o755)
        package = Path(tmp) / "cuda_agent"  # the two modules need the standard library only: any interpreter will do
        package.mkdir()
        for module in (cuda_agent, gpu_turns, machine):
            shutil.copy(module.__file__, package)
        turns = GpuTurns(Path(tmp) / "gpu-turns" / "GPU-eeee")
        with turns.exclusive():
            pass
        if os.geteuid() != 0:  # as another user would see them: ours to read, not to write
            for path in (*turns.folder.iterdir(), turns.folder):
                path.chmod(path.stat().st_mode & ~0o222)
        script = (
            f"import os, sys; sys.path.insert(0, {tmp!r}); from cuda_agent.gpu_turns import GpuTurns\n"
            f"turns = GpuTurns({str(turns.folder)!r})\n"
            "with turns.exclusive(): pass\n"
            "with turns.shared(): pass\n"
            "try:\n    os.unlink(turns.gate)\nexcept PermissionError:\n    print('kept')\n"
        )
        user = "nobody" if os.geteuid() == 0 else None
        child = subprocess.run([python, "-c", script], capture_output=True, text=True, user=user, timeout=60)
        turns.folder.chmod(0o755)
        assert (child.returncode, child.stdout.strip()) == (0, "kept"), child.stderr
