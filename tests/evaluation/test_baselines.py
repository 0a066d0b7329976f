"""The baselines data file seeds the judge's cache: the judge then reads the file's times, re-timing nothing."""

from __future__ import annotations

from pathlib import Path

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
