"""Which lock folder a process takes its GPU turns in: one per physical GPU, however the GPU is named."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cuda_agent import gpu_turns
from cuda_agent.gpu_turns import physical_gpu, turns_for

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
    monkeypatch.setattr(gpu_turns, "_gpu_uuids", lambda: UUIDS)
    assert physical_gpu(visible) == expected


def test_turns_live_in_the_cache_folder_per_gpu(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(gpu_turns, "_gpu_uuids", lambda: UUIDS)
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
