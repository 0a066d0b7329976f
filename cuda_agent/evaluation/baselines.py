"""Eager and torch.compile baselines of a suite, measured with the judge's protocol, as a data file.

`cuda-agent bench baselines --suite kernelbench --levels 1 --out FILE` times each task's reference
through the judge's own baseline process (`reference_timings`: a child process per task, the
judge's timing protocol and precision flags) and rewrites FILE after every task, so an interrupted
run carries on where it stopped (`--resume`, the default when FILE exists). Timed phases need the
device to themselves: with `--workers N`, N baseline processes start, make inputs and compile at
once, and a file lock (`JudgeConfig.timing_lock`) lets one at a time into its timed phases.

The file doubles as the judge's baseline cache: `seed_cache(FILE)` writes each entry where the
judge looks for it (`<cache>/baselines/<key>.json`, keyed by task source, device name, torch and
CUDA versions, precision flags, compile mode, protocol version and a CPU timing's threads:
`judge.baseline_key_env`), so a machine that matches the
one that measured (a committed H200 file on an H200 with the same torch) re-times nothing, and any
other machine simply misses the cache and measures. `seed_cache(FOLDER)` takes the cache's own files as
well (a device run's `baseline_cache/`, committed with its results), so what one session measured on a
card without a file is not measured again by the next.
"""

from __future__ import annotations

import platform
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cuda_agent.errors import ConfigError, Error
from cuda_agent.judge import BaselineResult, JudgeConfig, baseline_key, baseline_key_env, reference_timings
from cuda_agent.machine import cache_root
from cuda_agent.types import Task


class BaselineEntry(BaseModel):
    """One task's baselines."""

    model_config = ConfigDict(extra="forbid")

    ref: str = Field(description="Task reference, e.g. 'kernelbench/L1/19'.")
    name: str = Field(description="Task name.")
    level: int | None = Field(default=None, description="KernelBench level.")
    code_sha256: str = Field(description="sha256 of the task source the times belong to.")
    cache_key: str | None = Field(default=None, description="The judge's baseline-cache key (None after an error).")
    eager_ms: float | None = Field(default=None, description="Eager median, ms.")
    compile_ms: float | None = Field(default=None, description="torch.compile median, ms (None if it failed).")
    result: BaselineResult | None = Field(default=None, description="The judge's full baseline record.")
    error: str | None = Field(default=None, description="Why the reference could not be timed.")
    wall_s: float = Field(default=0.0, description="Wall time of the measurement (compile included), s.")


class BaselineFile(BaseModel):
    """The data file: where and how the baselines were measured, and one entry per task."""

    model_config = ConfigDict(extra="forbid")

    format_version: int = 1
    environment: dict[str, Any] = Field(default_factory=dict, description="Device, torch, CUDA, protocol, host.")
    judge_config: dict[str, Any] = Field(default_factory=dict, description="JudgeConfig fields that shape timings.")
    updated_at: str = Field(default="", description="ISO 8601 UTC time of the last write.")
    entries: dict[str, BaselineEntry] = Field(default_factory=dict, description="By task ref.")


def cache_key(task: Task, device: str, config: JudgeConfig) -> str:
    """The key under which the judge caches this task's baselines on this machine."""
    return baseline_key(task.code, device, config)


def _environment(device: str, config: JudgeConfig) -> dict[str, Any]:
    name, env = baseline_key_env(device, config)  # the judge's own cache-key facts, so the file's agree with its keys
    return {**env, "device": device, "device_name": name, "python": platform.python_version(), "host": platform.node()}


def load_file(path: Path) -> BaselineFile:
    return BaselineFile.model_validate_json(path.read_text()) if path.exists() else BaselineFile()


def _save(data: BaselineFile, path: Path) -> None:
    data.updated_at = datetime.now(UTC).isoformat(timespec="seconds")
    tmp = path.with_suffix(".tmp")
    tmp.write_text(data.model_dump_json(indent=1))
    tmp.replace(path)  # atomic: an interrupt never leaves half a file


def measure(
    tasks: list[Task],
    path: Path,
    config: JudgeConfig,
    device: str,
    on_done: Callable[[BaselineEntry], None] = lambda entry: None,
    workers: int = 1,
) -> BaselineFile:
    """Time each task's reference not yet in `path` (same source, no error) and save after each one.

    Args:
        workers: baseline processes at once; above 1 they share the device through a lock file in
            the cache folder, held around each timed phase (unless `config.timing_lock` names one).

    Raises:
        ConfigError: `path` holds baselines of another device, torch or protocol; `workers` < 1.
    """
    if workers < 1:
        raise ConfigError(f"--workers must be at least 1, not {workers}")
    path.parent.mkdir(parents=True, exist_ok=True)
    data = load_file(path)
    env = _environment(device, config)
    # Every fact of the judge's cache key: a file timed on 4 CPU threads must not take 1-thread entries.
    keys = ("device_name", *baseline_key_env(device, config)[1])
    if data.entries and any(data.environment.get(k) != env[k] for k in keys):
        raise ConfigError(
            f"{path} holds baselines measured elsewhere ({', '.join(f'{k}={data.environment.get(k)}' for k in keys)}): "
            "write to a new file"
        )
    if workers > 1 and config.timing_lock is None:
        # In the judge's cache folder rather than beside the file: every run on this machine shares it.
        config.cache_dir.mkdir(parents=True, exist_ok=True)
        config = config.model_copy(update={"timing_lock": config.cache_dir / "timing.lock"})
    data.environment = {**env, "workers": workers}
    data.judge_config = config.model_dump(mode="json", exclude={"cache_dir", "timing_lock"})
    todo = [
        task
        for task in tasks
        if not (
            (old := data.entries.get(task.ref)) is not None and old.code_sha256 == task.code_hash and old.error is None
        )
    ]
    saving = threading.Lock()

    def record(entry: BaselineEntry) -> None:
        with saving:
            data.entries[entry.ref] = entry
            _save(data, path)
        on_done(entry)

    if workers == 1:
        for task in todo:
            record(_measure_one(task, config, device))
    else:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="baseline") as pool:
            for future in as_completed([pool.submit(_measure_one, task, config, device) for task in todo]):
                record(future.result())
    _save(data, path)
    return data


def _measure_one(task: Task, config: JudgeConfig, device: str) -> BaselineEntry:
    start = time.monotonic()
    base = BaselineEntry(ref=task.ref, name=task.name, level=task.level, code_sha256=task.code_hash)
    try:
        result = reference_timings(task, config)
    except Error as exc:  # a reference that fails, or a timing process that died: recorded, retried on resume
        return base.model_copy(update={"error": f"{type(exc).__name__}: {exc}", "wall_s": time.monotonic() - start})
    return base.model_copy(
        update={
            "cache_key": cache_key(task, device, config),
            "eager_ms": result.eager["median_ms"] if result.eager else None,
            "compile_ms": result.compile["median_ms"] if result.compile else None,
            "result": result,
            "wall_s": time.monotonic() - start,
        }
    )


def seed_cache(path: Path, cache_dir: Path | None = None) -> int:
    """Write every measured baseline of `path` into the judge's baseline cache; returns how many.

    `path` is a file of `cuda-agent bench baselines`, or a folder of the cache's own files (`<key>.json`, as a
    device run returns its cache's `baselines/` folder): a card without a committed file then keeps what one
    session measured for the next.

    Raises:
        ConfigError: `path` does not exist, or a file of the folder is not one of the cache's.
    """
    if not path.exists():
        raise ConfigError(f"{path}: no such baselines file or folder (write one with `cuda-agent bench baselines`)")
    folder = (cache_dir or cache_root()) / "baselines"
    folder.mkdir(parents=True, exist_ok=True)
    found = _cache_files(path) if path.is_dir() else _file_results(path)
    for key, result in found.items():
        target = folder / f"{key}.json"
        tmp = target.with_suffix(".tmp")
        tmp.write_text(result.model_dump_json())
        tmp.replace(target)
    return len(found)


def _file_results(path: Path) -> dict[str, BaselineResult]:
    """The measured entries of a baselines file, by cache key."""
    entries = load_file(path).entries.values()
    return {e.cache_key: e.result for e in entries if e.result is not None and e.cache_key is not None}


_CACHE_NAME = re.compile(r"[0-9a-f]{32}\.json")


def _cache_files(folder: Path) -> dict[str, BaselineResult]:
    """The baselines in a folder of cache files (`<key>.json`); one that failed to time is left out, as the judge
    never caches it."""
    names = sorted(p for p in folder.iterdir() if p.suffix == ".json")  # not the judge's half-written .tmp files
    if not names:
        raise ConfigError(f"{folder}: no baseline cache files (<key>.json) in this folder")
    found: dict[str, BaselineResult] = {}
    for path in names:
        if not _CACHE_NAME.fullmatch(path.name):
            raise ConfigError(f"{path}: not a baseline cache file (<32 hex digits>.json); give the folder they are in")
        try:
            result = BaselineResult.model_validate_json(path.read_text())
        except ValidationError as exc:
            raise ConfigError(f"{path}: not a baseline cache file: {exc.errors()[0]['msg']}") from exc
        if result.error is None:
            found[path.stem] = result
    return found
