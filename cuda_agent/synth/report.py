"""`cuda-agent synth report FILE`: a data set next to Ops-6K, as a table and a markdown file.

Compared: depth mix, operator frequencies, duplicates (exact / near), decontamination (maximum and
count above 0.9 of structural similarity to KernelBench; same operator set as a KernelBench problem)
and filter pass rates (from a synthesis sidecar, or an audit of the four filters).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, Field

from cuda_agent.synth.audit import AuditSummary, read_results, summarize
from cuda_agent.synth.decontaminate import StructureIndex, exact_key, near_key, operator_signature
from cuda_agent.synth.pipeline import read_sidecar


class DatasetFigures(BaseModel):
    """What the report shows for one data set."""

    name: str
    rows: int
    depth_mix: dict[str, float] = Field(description="Depth ('1'..'5' or 'other') -> percent of rows.")
    top_ops: list[tuple[str, int]]
    distinct_ops: int
    exact_duplicates: int
    near_duplicates: int
    kb_max_similarity: float
    kb_above_threshold: int
    kb_same_signature: int
    filters: AuditSummary | None = None
    filters_mode: str = Field(default="n/a", description="'audit' (every filter on every row) or 'funnel'.")
    synth_outcomes: dict[str, int] | None = Field(default=None, description="Sidecar reasons -> candidates.")


def _ops(raw: str) -> list[str] | None:
    try:
        ops = json.loads(raw)
    except (json.JSONDecodeError, TypeError):
        return None
    return ops if isinstance(ops, list) else None


def dataset_figures(name: str, rows: list[dict], kernelbench: list[tuple[str, str]], threshold: float = 0.9):
    """Figures of one data set (rows with `ops` and `code`) against KernelBench."""
    depths: Counter[str] = Counter()
    ops_count: Counter[str] = Counter()
    for row in rows:
        ops = _ops(row["ops"])
        depths[str(len(ops)) if ops and len(ops) <= 5 else "other"] += 1
        ops_count.update(ops or [])
    codes = [row["code"] for row in rows]
    index = StructureIndex(kernelbench)
    # Both figures stay exact with a floor of min(threshold, best so far): a row below it can change neither,
    # and the floor lets difflib's cheap upper bounds skip most comparisons (about 20x faster than none).
    best, above = 0.0, 0
    for code in codes:
        score = index.nearest(code, at_least=min(threshold, best)).similarity
        best, above = max(best, score), above + (score > threshold)
    kb_signatures = {operator_signature(code) for _, code in kernelbench}
    return DatasetFigures(
        name=name,
        rows=len(rows),
        depth_mix={d: 100 * depths[d] / max(1, len(rows)) for d in sorted(depths)},
        top_ops=ops_count.most_common(15),
        distinct_ops=len(ops_count),
        exact_duplicates=len(codes) - len({exact_key(c) for c in codes}),
        near_duplicates=len(codes) - len({near_key(c) for c in codes}),
        kb_max_similarity=best,
        kb_above_threshold=above,
        kb_same_signature=sum(operator_signature(c) in kb_signatures for c in codes),
    )


def attach_measurements(figures: DatasetFigures, parquet: Path, audit_path: Path | None) -> DatasetFigures:
    """Add filter figures: an audit file if given, else the synthesis sidecar beside the parquet."""
    if audit_path is not None and audit_path.is_file():
        figures.filters = summarize(read_results(audit_path))
        figures.filters_mode = "audit: every filter on every row"
    records = read_sidecar(parquet)
    if records:
        figures.synth_outcomes = dict(Counter(r.reason or "kept" for r in records).most_common())
        filtered = [r.filter for r in records if r.filter is not None]
        if filtered and figures.filters is None:
            figures.filters = summarize(filtered)
            figures.filters_mode = "funnel: candidates passing this and every earlier filter"
    return figures


def _rows(a: DatasetFigures, b: DatasetFigures) -> list[tuple[str, str, str]]:
    rows = [("rows", str(a.rows), str(b.rows))]
    for depth in sorted(set(a.depth_mix) | set(b.depth_mix)):
        rows.append((f"depth {depth} (%)", f"{a.depth_mix.get(depth, 0):.2f}", f"{b.depth_mix.get(depth, 0):.2f}"))
    rows += [
        ("distinct operators", str(a.distinct_ops), str(b.distinct_ops)),
        ("exact duplicates", str(a.exact_duplicates), str(b.exact_duplicates)),
        ("near duplicates", str(a.near_duplicates), str(b.near_duplicates)),
        ("max similarity to KernelBench", f"{a.kb_max_similarity:.3f}", f"{b.kb_max_similarity:.3f}"),
        ("similarity > 0.9", str(a.kb_above_threshold), str(b.kb_above_threshold)),
        ("same operator set as a KernelBench problem", str(a.kb_same_signature), str(b.kb_same_signature)),
    ]
    rows.append(("filter counts", a.filters_mode, b.filters_mode))
    for name in ("runs_eager", "deterministic", "input_dependent", "time_window", "runs_compile"):
        cells = []
        for fig in (a, b):
            f = fig.filters
            cells.append(f"{f.passed[name]}/{f.rows}" if f is not None else "n/a")
        rows.append((f"passes {name}", *cells))
    cells = [f"{f.filters.passed_all}/{f.filters.rows}" if f.filters else "n/a" for f in (a, b)]
    rows.append(("passes all four", *cells))
    cells = [_stopped(f.filters) for f in (a, b)]
    rows.append(("timeout / crash (counted as failing)", *cells))
    cells = [f"{f.filters.eager_ms_median:.1f}" if f.filters and f.filters.eager_ms_median else "n/a" for f in (a, b)]
    rows.append(("eager ms, median of timed rows", *cells))
    return rows


def _stopped(summary: AuditSummary | None) -> str:
    if summary is None:
        return "n/a"
    return f"{summary.outcomes.get('timeout', 0)} / {summary.outcomes.get('crash', 0)}"


def to_markdown(a: DatasetFigures, b: DatasetFigures) -> str:
    lines = [f"# {a.name} vs {b.name}", "", f"| | {a.name} | {b.name} |", "|---|---|---|"]
    lines += [f"| {k} | {x} | {y} |" for k, x, y in _rows(a, b)]
    for fig in (a, b):
        lines += ["", f"## Top operators: {fig.name}", "", "| operator | count |", "|---|---|"]
        lines += [f"| {op} | {n} |" for op, n in fig.top_ops]
        if fig.synth_outcomes:
            lines += ["", f"## Candidate outcomes: {fig.name}", "", "| outcome | candidates |", "|---|---|"]
            lines += [f"| {k} | {v} |" for k, v in fig.synth_outcomes.items()]
    return "\n".join(lines) + "\n"


def print_table(a: DatasetFigures, b: DatasetFigures) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{a.name} vs {b.name}")
    for column in ("", a.name, b.name):
        table.add_column(column)
    for row in _rows(a, b):
        table.add_row(*row)
    Console().print(table)
