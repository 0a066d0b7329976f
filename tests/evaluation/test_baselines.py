"""The baselines data file seeds the judge's cache: the judge then reads the file's times, re-timing nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cuda_agent.errors import ConfigError
from cuda_agent.evaluation.baselines import BaselineEntry, BaselineFile, _environment, cache_key, measure, seed_cache
from cuda_agent.judge import JudgeConfig
from cuda_agent.judge.pipeline import reference_timings
from cuda_agent.judge.protocol import BaselineResult
from cuda_agent.tasks import Catalog


def _file(tmp_path: Path, config: JudgeConfig) -> tuple[Path, BaselineResult]:
    task = Catalog().resolve("examples/relu")
    result = BaselineResult(eager={"median_ms": 123.0}, compile={"median_ms": 45.0})
    entry = BaselineEntry(
        ref=task.ref,
        name=task.name,
        code_sha256=task.code_hash,
        cache_key=cache_key(task, "cpu", config),
        eager_ms=123.0,
        compile_ms=45.0,
        result=result,
    )
    path = tmp_path / "baselines.json"
    path.write_text(BaselineFile(environment=_environment("cpu", config), entries={task.ref: entry}).model_dump_json())
    return path, result


def test_seeded_cache_is_what_the_judge_reads(tmp_path: Path) -> None:
    config = JudgeConfig(device="cpu", cache_dir=tmp_path / "cache")
    path, result = _file(tmp_path, config)
    assert seed_cache(path, tmp_path / "cache") == 1
    assert reference_timings(Catalog().resolve("examples/relu"), config) == result


def test_measure_skips_tasks_already_in_the_file(tmp_path: Path) -> None:
    config = JudgeConfig(device="cpu", cache_dir=tmp_path / "cache")
    path, _ = _file(tmp_path, config)
    data = measure([Catalog().resolve("examples/relu")], path, config, "cpu")
    assert data.entries["examples/relu"].eager_ms == 123.0  # not re-timed
    assert data.environment["device_name"] == "cpu" and data.environment["protocol_version"]


def test_parallel_measure_records_every_task_once_and_shares_a_timing_lock(tmp_path: Path, monkeypatch) -> None:
    import cuda_agent.evaluation.baselines as baselines

    seen: list[tuple[str, Path | None]] = []

    def fake_measure_one(task, config, device):  # the real one starts a timing process per task
        seen.append((task.ref, config.timing_lock))
        return BaselineEntry(ref=task.ref, name=task.name, code_sha256=task.code_hash, eager_ms=1.0, compile_ms=2.0)

    monkeypatch.setattr(baselines, "_measure_one", fake_measure_one)
    tasks = [Catalog().resolve(ref) for ref in ("examples/relu", "examples/scale_add", "examples/row_sum")]
    path = tmp_path / "baselines.json"
    data = measure(tasks, path, JudgeConfig(device="cpu", cache_dir=tmp_path / "cache"), "cpu", workers=3)
    assert sorted(ref for ref, _ in seen) == sorted(t.ref for t in tasks)
    assert {lock for _, lock in seen} == {tmp_path / "cache" / "timing.lock"}
    assert set(BaselineFile.model_validate_json(path.read_text()).entries) == {t.ref for t in tasks}
    assert data.environment["workers"] == 3


def test_timing_lock_lets_one_process_time_at_a_time(tmp_path: Path) -> None:
    import subprocess
    import sys
    import time

    from cuda_agent.judge.child.baseline import _timing_lock

    lock = tmp_path / "gpu.lock"
    holder = (
        "import sys, time; from cuda_agent.judge.child.baseline import _timing_lock\n"
        "with _timing_lock(sys.argv[1]):\n    print('held', flush=True); time.sleep(1.5)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", holder, str(lock)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "held"
    start = time.monotonic()
    with _timing_lock(str(lock)):
        waited = time.monotonic() - start
    child.wait(timeout=30)
    assert waited > 0.5  # blocked until the other process left its timed phase


def test_file_environment_holds_the_judge_cache_key_facts_and_refuses_other_cpu_threads(tmp_path: Path) -> None:
    from cuda_agent.judge import baseline_key_env

    task = Catalog().resolve("examples/relu")
    four = JudgeConfig(device="cpu", cache_dir=tmp_path / "cache", cpu_threads=4)
    one = four.model_copy(update={"cpu_threads": 1})
    name, key_env = baseline_key_env("cpu", four)
    assert key_env["cpu_threads"] == 4
    assert {k: _environment("cpu", four)[k] for k in (*key_env, "device_name")} == {**key_env, "device_name": name}
    assert cache_key(task, "cpu", four) != cache_key(task, "cpu", one)  # a 4-thread time never answers a 1-thread one
    path, _ = _file(tmp_path, four)
    with pytest.raises(ConfigError, match="cpu_threads=4"):
        measure([task], path, one, "cpu")  # resuming with other threads would mix two keys' times in one file


def test_a_folder_of_cache_files_seeds_the_cache_and_the_judge_reads_it(tmp_path: Path) -> None:
    """What a device run returns (its cache's baselines/ folder) seeds another machine's cache as a file does."""
    measured = JudgeConfig(device="cpu", cache_dir=tmp_path / "measured")
    path, result = _file(tmp_path, measured)
    seed_cache(path, tmp_path / "measured")
    returned = tmp_path / "baseline_cache"
    returned.mkdir()
    for f in (tmp_path / "measured" / "baselines").glob("*.json"):
        returned.joinpath(f.name).write_text(f.read_text())
    failed = BaselineResult(error="reference failed while timed: RuntimeError")
    returned.joinpath("f" * 32 + ".json").write_text(failed.model_dump_json())  # the judge never reads one back
    returned.joinpath("0" * 32 + ".tmp").write_text("half a file")  # an interrupted write of the judge's own

    assert seed_cache(returned, tmp_path / "fresh") == 1
    assert sorted(p.name for p in (tmp_path / "fresh" / "baselines").iterdir()) == [f"{cache_key_of(path)}.json"]
    fresh = JudgeConfig(device="cpu", cache_dir=tmp_path / "fresh")
    assert reference_timings(Catalog().resolve("examples/relu"), fresh) == result


def cache_key_of(path: Path) -> str:
    return next(iter(BaselineFile.model_validate_json(path.read_text()).entries.values())).cache_key or ""


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("notes.json", "{}", "not a baseline cache file (<32 hex digits>.json)"),
        ("a" * 32 + ".json", '{"eager": 3}', "not a baseline cache file"),
        ("readme.txt", "", "no baseline cache files"),
    ],
)
def test_a_folder_that_is_not_the_caches_is_a_config_error(tmp_path: Path, name: str, text: str, says: str) -> None:
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / name).write_text(text)
    with pytest.raises(ConfigError, match=re.escape(says)):
        seed_cache(tmp_path / "folder", tmp_path / "cache")
