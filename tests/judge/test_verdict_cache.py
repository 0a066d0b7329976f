"""The verdict cache's storage: keyed by everything a verdict depends on, safe with concurrent writers."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from cuda_agent.judge import verdict_cache
from cuda_agent.judge.config import JudgeConfig
from cuda_agent.judge.verdict_cache import VerdictCache, verdict_key
from cuda_agent.types import Verdict

MACHINE = {"device_name": "cpu", "host": "h"}


def _verdict(message: str) -> Verdict:
    return Verdict(task="t", verdict="pass", reward=1, correct=True, message=message, stage_s={"run": 2.0})


def test_the_key_changes_with_each_input_and_not_with_where_files_are_kept(tmp_path: Path, monkeypatch) -> None:
    config = JudgeConfig(cache_dir=tmp_path / "a", candidate_user="nobody")
    base = verdict_key("task", "content", config, "cpu", MACHINE, "nobody")
    others = [
        verdict_key("task2", "content", config, "cpu", MACHINE, "nobody"),
        verdict_key("task", "content2", config, "cpu", MACHINE, "nobody"),
        verdict_key("task", "content", config.model_copy(update={"atol": 1e-3}), "cpu", MACHINE, "nobody"),
        verdict_key("task", "content", config, "cuda", MACHINE, "nobody"),
        verdict_key("task", "content", config, "cpu", {**MACHINE, "driver": "580"}, "nobody"),
        # Asked for, but the candidate ran as ours: what it could do differs (write the shared cache, say).
        verdict_key("task", "content", config, "cpu", MACHINE, None),
    ]
    monkeypatch.setattr(verdict_cache, "toolchain", lambda: "/usr/local/cuda-13.1/bin/nvcc:1:2")
    others.append(verdict_key("task", "content", config, "cpu", MACHINE, "nobody"))  # another compiler
    assert len({base, *others}) == 8
    monkeypatch.undo()
    moved = config.model_copy(update={"cache_dir": tmp_path / "b", "verdict_cache": False})
    assert verdict_key("task", "content", moved, "cpu", MACHINE, "nobody") == base


def test_a_stored_verdict_comes_back_marked_and_named_for_the_asker(tmp_path: Path) -> None:
    cache = VerdictCache(tmp_path)
    assert cache.get("k" * 64, "examples/relu") is None
    cache.put("k" * 64, _verdict("first"))
    got = cache.get("k" * 64, "examples/relu")
    assert (got.task, got.message, got.env["verdict_cached"]) == ("examples/relu", "first", True)
    assert got.env["cached_from"]["stage_s"] == {"run": 2.0} and list(got.stage_s) == ["verdict_cache"]
    (tmp_path / "kk" / f"{'k' * 64}.json").write_text('{"verdict": {"half')  # damaged: a miss, not an error
    assert cache.get("k" * 64, "examples/relu") is None


def _write_many(root: Path, key: str, n: int) -> None:
    cache = VerdictCache(root)
    for i in range(30):
        cache.put(key, _verdict(f"writer {n} entry {i} " + "x" * 300_000))


def test_concurrent_writers_never_leave_half_an_entry(tmp_path: Path) -> None:
    key, seen = "c" * 64, []
    cache = VerdictCache(tmp_path)
    writers = [
        multiprocessing.get_context("fork").Process(target=_write_many, args=(tmp_path, key, n)) for n in range(3)
    ]
    for w in writers:
        w.start()
    while any(w.is_alive() for w in writers):
        got = cache.get(key, "t")
        seen.append(got.message.startswith("writer") if got is not None else None)
    for w in writers:
        w.join()
    assert all(w.exitcode == 0 for w in writers)
    first = seen.index(True)
    # Once an entry exists every read finds a whole one: a half-written file would read as a miss (None).
    assert set(seen[first:]) == {True} and set(seen[:first]) <= {None}
    assert [p.name for p in (tmp_path / "cc").iterdir()] == [f"{key}.json"]  # no temporary file left
