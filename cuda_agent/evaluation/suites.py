"""Which tasks a run covers (`--suite`, `--levels`) and which solution file belongs to each task.

Suites:
- `kernelbench`: the 250 KernelBench problems; `kernelbench/L2`: one level of them;
- `ops6k` or a slice `ops6k[START:STOP]` (Python slice of the rows, e.g. `ops6k[0:100]`, `ops6k[:50]`);
- `examples`: the problems bundled with the package;
- a path: a folder of problem files, a KernelBench checkout or a parquet (anything `Catalog` loads);
- a comma-separated list of task references, e.g. `kernelbench/L1/1,kernelbench/L1/19` (a handful of tasks).

Solution names in a `--solutions` folder, first match wins (sorted):
- KernelBench tasks: `level_{L}_problem_{P}.py` or `level_{L}_problem_{P}_anything.py` (KernelBench's own
  naming of generated kernels), `L{L}/{P}.py` or `L{L}/{P}_anything.py`, or those names without `.py`
  for a workspace folder (`L{L}/{P}/` holding model_new.py and kernels/);
- other tasks: `{name}.py` (e.g. `relu.py` for examples/relu), `{problem_id}.py` for Ops-6K rows, or a
  workspace folder of the same name.
`--solutions examples` means the bundled solutions for the device (solutions/cpu or solutions/cuda), or with
`--lang triton` the Triton ones (solutions/triton).
A task with no matching file is reported as missing and counts as failed.
"""

from __future__ import annotations

import re
from pathlib import Path

from cuda_agent.errors import ConfigError
from cuda_agent.tasks import Catalog
from cuda_agent.types import Task

EXAMPLE_SOLUTIONS = Path(__file__).resolve().parents[1] / "tasks" / "examples" / "solutions"
_SLICE = re.compile(r"^(?P<set>[\w.\-/~]+)\[(?P<start>-?\d*):(?P<stop>-?\d*)\]$")


def select_tasks(suite: str, levels: list[int] | None = None, catalog: Catalog | None = None) -> list[Task]:
    """The tasks of a suite, filtered to `levels` when given.

    Raises:
        ConfigError: the suite names no tasks, or the level filter leaves none.
        TaskError, DataNotFoundError: the set cannot be found or read.
    """
    catalog = catalog or Catalog()
    tasks = _suite_tasks(suite.strip(), catalog)
    if levels:
        tasks = [t for t in tasks if t.level in levels]
    if not tasks:
        raise ConfigError(
            f"suite {suite!r} with levels {levels or 'all'} has no tasks: check the name "
            "(kernelbench, kernelbench/L2, ops6k[0:100], examples, or a folder) and --levels"
        )
    return tasks


def _suite_tasks(suite: str, catalog: Catalog) -> list[Task]:
    if "," in suite:
        return [catalog.resolve(ref) for ref in suite.split(",") if ref.strip()]
    match = _SLICE.match(suite)
    if match:
        rows = catalog.tasks(match["set"])
        start = int(match["start"]) if match["start"] else None
        stop = int(match["stop"]) if match["stop"] else None
        return rows[start:stop]
    level = re.fullmatch(r"kernelbench/L(\d)", suite)
    if level:
        return [t for t in catalog.tasks("kernelbench") if t.level == int(level[1])]
    return catalog.tasks(suite)


def solutions_dir(solutions: str, device: str, language: str = "cuda") -> Path:
    """The folder `--solutions` names; 'examples' is the bundled solutions for the device (or Triton's, for both).

    Raises:
        ConfigError: the folder does not exist.
    """
    if solutions == "examples":
        return EXAMPLE_SOLUTIONS / ("triton" if language == "triton" else "cuda" if device == "cuda" else "cpu")
    path = Path(solutions).expanduser()
    if not path.is_dir():
        raise ConfigError(f"--solutions {solutions}: no such folder (give a folder of solution files, or 'examples')")
    return path


def candidate_names(task: Task) -> list[str]:
    """Glob patterns, relative to the solutions folder, that name this task's solution (in priority order)."""
    if task.level is not None and task.problem_id is not None:
        level, number = task.level, task.problem_id
        return [
            f"level_{level}_problem_{number}.py",
            f"level_{level}_problem_{number}_*.py",
            f"L{level}/{number}.py",
            f"L{level}/{number}_*.py",
            f"L{level}/{number}",
            f"level_{level}_problem_{number}",
        ]
    names = [task.name] + ([str(task.problem_id)] if task.problem_id is not None else [])
    return [f"{name}{suffix}" for name in names for suffix in (".py", "")]


def find_solution(task: Task, folder: Path) -> Path | None:
    """The solution file (or workspace folder) for `task` in `folder`, or None."""
    for pattern in candidate_names(task):
        matches = sorted(p for p in folder.glob(pattern) if p.is_file() or (p / "model_new.py").is_file())
        if matches:
            return matches[0]
    return None
