"""Loaders that turn KernelBench and Ops-6K data, in any of their published forms, into `Task`s.

Supported forms:
- a parquet with the KernelBench layout (`level`, `problem_id`, `name`, `code`);
- a parquet with the Ops-6K layout (`ops`, `data_source`, `code`);
- a KernelBench checkout (the repository root or its `KernelBench/` folder, holding `level1..3/`);
- a folder of `.py` problem files (recursively), or one `.py` file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from cuda_agent.errors import TaskError
from cuda_agent.types import Task

_KB_COLUMNS = {"level", "problem_id", "name", "code"}
_OPS_COLUMNS = {"ops", "code"}
_LEVEL_DIR = re.compile(r"^level(\d+)$")
_PROBLEM_FILE = re.compile(r"^(\d+)_.*\.py$")


def load_parquet(path: Path, source: str) -> list[Task]:
    """Load every row of a KernelBench- or Ops-6K-layout parquet.

    Args:
        path: the parquet file.
        source: the name refs start with, e.g. 'kernelbench', 'ops6k' or the path itself.

    Raises:
        TaskError: the file is missing, unreadable, or has neither column layout.
    """
    import pyarrow.parquet as pq

    if not path.is_file():
        raise TaskError(f"{path}: no such parquet file")
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several unrelated types for a bad file
        raise TaskError(f"{path}: cannot read as parquet ({exc})") from exc
    columns = set(table.column_names)
    rows = table.to_pylist()
    if _KB_COLUMNS <= columns:
        return [_kernelbench_task(source, r["level"], r["problem_id"], r["name"], r["code"]) for r in rows]
    if _OPS_COLUMNS <= columns:
        return [_ops_task(source, i, r) for i, r in enumerate(rows)]
    raise TaskError(
        f"{path}: columns {sorted(columns)} match neither the KernelBench layout {sorted(_KB_COLUMNS)} "
        f"nor the Ops-6K layout ['code', 'data_source', 'ops']"
    )


def load_kernelbench_checkout(path: Path, source: str = "kernelbench") -> list[Task]:
    """Load the `level1..N` folders of a KernelBench checkout (root or its `KernelBench/` folder)."""
    root = path / "KernelBench" if (path / "KernelBench").is_dir() else path
    level_dirs = sorted((d for d in root.iterdir() if d.is_dir() and _LEVEL_DIR.match(d.name)), key=_level_of)
    if not level_dirs:
        raise TaskError(f"{path}: not a KernelBench checkout (no level1, level2, ... folders)")
    tasks = []
    for level_dir in level_dirs:
        level = _level_of(level_dir)
        for file in sorted(level_dir.glob("*.py"), key=lambda f: _problem_number(f) or 0):
            number = _problem_number(file)
            if number is not None:
                tasks.append(_kernelbench_task(source, level, number, file.stem, _read(file)))
    return tasks


def load_folder(path: Path, source: str | None = None) -> list[Task]:
    """Load every `.py` problem file under a folder (recursively), sorted by relative path."""
    files = sorted(p for p in path.rglob("*.py") if p.is_file() and not p.name.startswith("_"))
    prefix = source or str(path)
    return [
        Task(
            ref=f"{prefix}/{f.relative_to(path).with_suffix('').as_posix()}",
            name=f.stem,
            source="folder",
            code=_read(f),
        )
        for f in files
    ]


def load_file(path: Path) -> Task:
    """Load one `.py` problem file; its ref is the path as given."""
    return Task(ref=str(path), name=path.stem, source="file", code=_read(path))


def load_path(path: Path) -> list[Task]:
    """Load whatever a user path holds: a parquet, a KernelBench checkout, a folder or a file."""
    if not path.exists():
        raise TaskError(f"{path}: no such file or folder")
    if path.is_file():
        if path.suffix == ".parquet":
            return load_parquet(path, str(path))
        if path.suffix == ".py":
            return [load_file(path)]
        raise TaskError(f"{path}: expected a .parquet file, a .py problem file or a folder")
    root = path / "KernelBench" if (path / "KernelBench").is_dir() else path
    if any(_LEVEL_DIR.match(d.name) for d in root.iterdir() if d.is_dir()):
        return load_kernelbench_checkout(path, str(path))
    return load_folder(path)


def _kernelbench_task(source: str, level: int, number: int, name: str, code: str) -> Task:
    return Task(
        ref=f"{source}/L{int(level)}/{int(number)}",
        name=name,
        source=source,
        level=int(level),
        problem_id=int(number),
        code=code,
    )


def _ops_task(source: str, row: int, record: dict) -> Task:
    ops = record.get("ops")
    try:
        ops_list = json.loads(ops) if isinstance(ops, str) else list(ops or [])
    except json.JSONDecodeError:
        ops_list = [ops]
    data_source = record.get("data_source") or ""
    metadata = {"ops": ops_list, "data_source": data_source}
    name = "_".join(str(o).split(".")[-1] for o in ops_list)[:80] or f"row{row}"
    return Task(ref=f"{source}/{row}", name=name, source=source, problem_id=row, code=record["code"], metadata=metadata)


def _level_of(d: Path) -> int:
    match = _LEVEL_DIR.match(d.name)
    return int(match.group(1)) if match else 0


def _problem_number(f: Path) -> int | None:
    match = _PROBLEM_FILE.match(f.name)
    return int(match.group(1)) if match else None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskError(f"{path}: cannot read problem file ({exc})") from exc
