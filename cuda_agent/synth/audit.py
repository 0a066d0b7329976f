"""Run the four filters over an existing data set (e.g. Ops-6K itself), every filter on every problem.

Results go to a JSONL file (one `FilterResult` a line, `index` = the row), appended as they arrive so
that a long audit resumes where it stopped. `summarize` turns them into per-filter pass counts.
"""

from __future__ import annotations

import json
import logging
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from cuda_agent.errors import ConfigError
from cuda_agent.synth.filters import FILTERS, OUT_OF_MEMORY, FilterConfig, FilterResult
from cuda_agent.synth.pool import FilterPool

log = logging.getLogger(__name__)


class AuditSummary(BaseModel):
    """Per-filter pass counts over the audited rows."""

    rows: int
    passed_all: int
    passed: dict[str, int]
    """Filter -> rows that passed it (a row that did not run eagerly fails every filter)."""
    outcomes: dict[str, int]
    """'pass', a first failed filter, 'timeout', 'crash' or 'out_of_memory' (alone on the device too) -> rows."""
    eager_ms_median: float | None


def read_rows(path: Path) -> list[dict]:
    """The rows of a data set's parquet.

    Raises:
        ConfigError: no such file, or not a parquet with a `code` column.
    """
    import pyarrow.parquet as pq

    if not path.is_file():
        raise ConfigError(f"{path}: no such file; give a parquet with a code column (e.g. ops6k/ops6k.parquet)")
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several unrelated types for a file that is not parquet
        raise ConfigError(f"{path}: not a readable parquet file ({type(exc).__name__})") from exc
    if "code" not in table.column_names:
        raise ConfigError(f"{path}: no code column (columns: {', '.join(table.column_names)})")
    return table.to_pylist()


def sample_rows(n_rows: int, sample: int | None, seed: int) -> list[int]:
    """Row indices to audit: all, or a seeded random sample (sorted)."""
    if sample is None or sample >= n_rows:
        return list(range(n_rows))
    return sorted(random.Random(seed).sample(range(n_rows), sample))


def read_results(path: Path) -> list[FilterResult]:
    """The results so far, the last line of a row winning (a row run again alone after running out of
    memory has two); a last line cut by a kill mid-write is dropped (that row runs again)."""
    if not path.is_file():
        return []
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    results = [FilterResult.model_validate_json(line) for line in lines[:-1]]
    try:
        results += [FilterResult.model_validate_json(line) for line in lines[-1:]]
    except ValueError:
        log.warning("%s: dropped a cut last line; that row will be filtered again", path)
    return list({r.index: r for r in results}.values())


def ran_out_of_memory(result: FilterResult) -> bool:
    """No verdict yet: memory ran out beside other workers. Audit files written before the filters had an
    out-of-memory reason of their own hold it as the failure of the filter that was running, error in `detail`."""
    return result.reason == OUT_OF_MEMORY or (not result.passed and "out of memory" in result.detail)


def audit(
    rows: list[dict],
    indices: list[int],
    config: FilterConfig,
    workers: int,
    results_path: Path,
    on_result: Callable[[FilterResult], None] | None = None,
) -> list[FilterResult]:
    """Filter the given rows (skipping those already in `results_path`) and return all results.

    Rows that ran out of memory beside the other workers run again at the end with one worker, alone on
    the device; if they run out of memory then, that is their outcome.
    """
    done = {r.index for r in read_results(results_path) if not ran_out_of_memory(r)}
    todo = [(i, rows[i]["code"]) for i in indices if i not in done]
    config = config.model_copy(update={"short_circuit": False})

    _drop_cut_line(results_path)

    def record(result: FilterResult) -> bool:
        with results_path.open("a") as f:
            f.write(result.model_dump_json() + "\n")
        if on_result is not None:
            on_result(result)
        return True

    with FilterPool(config, workers, results_path.with_suffix(".log")) as pool:
        pool.map(todo, record)
    wanted = set(indices)
    again = [
        (r.index, rows[r.index]["code"])
        for r in read_results(results_path)
        if r.index in wanted and ran_out_of_memory(r)
    ]
    if again and workers > 1:
        log.warning("%d rows ran out of memory beside other workers: running them again, one at a time", len(again))
        with FilterPool(config, 1, results_path.with_suffix(".log")) as pool:
            pool.map(again, record)
    return [r for r in read_results(results_path) if r.index in wanted]


def _drop_cut_line(path: Path) -> None:
    """Remove a last line left without its newline by a kill, so that appends start on a line of their own."""
    if not path.is_file():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        path.write_bytes(data[: data.rfind(b"\n") + 1])


def summarize(results: list[FilterResult]) -> AuditSummary:
    import statistics

    passed = Counter()
    for r in results:
        for name in FILTERS:
            passed[name] += bool(r.checks.get(name))
    outcomes = Counter("pass" if r.passed else (r.reason or "unknown") for r in results)
    times = [r.eager_ms for r in results if r.eager_ms is not None]
    return AuditSummary(
        rows=len(results),
        passed_all=sum(r.passed for r in results),
        passed={name: passed[name] for name in FILTERS},
        outcomes=dict(outcomes.most_common()),
        eager_ms_median=statistics.median(times) if times else None,
    )


def dump_summary(summary: AuditSummary, path: Path) -> None:
    path.write_text(json.dumps(summary.model_dump(), indent=1) + "\n")
