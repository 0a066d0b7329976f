"""Named task sets and task references.

A reference names one task:
- `kernelbench/L1/19` (level 1, problem 19; `kernelbench/L1/19_ReLU` also works);
- `ops6k/123` (row 123 of Ops-6K);
- `examples/relu` (a problem bundled with the package);
- a path to a `.py` problem file;
- `PATH::KEY` for a task inside a user data set (a parquet, a KernelBench checkout or a folder),
  where KEY is what follows the set's name in its refs, e.g. `~/kb.parquet::L2/12`.

The bundled sets are looked up in `$CUDA_AGENT_KERNELBENCH` / `$CUDA_AGENT_OPS6K` (a file or
folder each), else in the folder given as `data_dir` (`--data-dir`) or `$CUDA_AGENT_DATA_DIR`, else
in the `shared/` folder beside the project checkout or the current directory. A location named
explicitly must exist: falling back to another copy of the data would silently evaluate on other
data than the one asked for.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from cuda_agent.errors import DataNotFoundError, TaskError
from cuda_agent.tasks import sources
from cuda_agent.types import Task

EXAMPLES_DIR = Path(__file__).parent / "examples" / "problems"


@dataclass(frozen=True)
class _SetSpec:
    name: str
    env_var: str
    relative: str


_SETS = {
    "kernelbench": _SetSpec("kernelbench", "CUDA_AGENT_KERNELBENCH", "kernelbench/kernelbench_l1-3.parquet"),
    "ops6k": _SetSpec("ops6k", "CUDA_AGENT_OPS6K", "ops6k/ops6k.parquet"),
}
SOURCES = ("kernelbench", "ops6k", "examples")


@dataclass
class Catalog:
    """Finds and caches the task sets; `data_dir` overrides where the bundled sets are looked up."""

    data_dir: Path | None = None
    _loaded: dict[str, list[Task]] = field(default_factory=dict)

    def tasks(self, source: str) -> list[Task]:
        """All tasks of a named set ('kernelbench', 'ops6k', 'examples') or of a user path."""
        if source not in self._loaded:
            self._loaded[source] = self._load(source)
        return self._loaded[source]

    def resolve(self, ref: str) -> Task:
        """Turn a reference (see module docstring) into its Task.

        Raises:
            TaskError: unknown set, no such task, or an unreadable file; the message says which.
        """
        ref = ref.strip()
        if "::" in ref:
            path, key = ref.split("::", 1)
            return _find(self.tasks(path), f"{path}::{key}", ref)
        head = ref.split("/", 1)[0]
        if head in SOURCES and not Path(ref).exists():
            return _find(self.tasks(head), ref, ref)
        path = Path(ref).expanduser()
        if path.suffix == ".py" or path.is_file():
            if not path.is_file():
                raise TaskError(f"{ref}: no such problem file")
            return sources.load_file(path)
        raise TaskError(
            f"{ref!r} is not a task reference: use kernelbench/L<level>/<id>, ops6k/<row>, "
            f"examples/<name>, a path to a .py problem file, or PATH::KEY for a user data set"
        )

    def __post_init__(self) -> None:
        # The option is checked at once; the environment only where data is read (a wrong variable set for
        # another purpose must not stop commands on bundled examples).
        if self.data_dir is not None and not Path(self.data_dir).expanduser().is_dir():
            raise DataNotFoundError(_no_folder(f"--data-dir {self.data_dir}"))

    def locate(self, name: str) -> Path:
        """Path of a bundled set's data, or DataNotFoundError listing where we looked.

        Raises:
            DataNotFoundError: not found, or a location named explicitly (`$CUDA_AGENT_KERNELBENCH` /
                `$CUDA_AGENT_OPS6K`, `data_dir`, `$CUDA_AGENT_DATA_DIR`) does not hold it; nothing else is tried then.
        """
        spec = _SETS[name]
        if os.environ.get(spec.env_var):
            return _explicit(Path(os.environ[spec.env_var]).expanduser(), f"{spec.env_var}={os.environ[spec.env_var]}")
        explicit = self._explicit_data_dir()
        if explicit is not None:
            folder, said = explicit
            if not folder.is_dir():
                raise DataNotFoundError(_no_folder(said))
            return _explicit(folder / spec.relative, said, f"(put {name} there, or set {spec.env_var})")
        candidates = [base / spec.relative for base in _default_data_dirs()]
        for candidate in candidates:
            if candidate.exists():
                return candidate
        looked = "\n  ".join(str(c) for c in candidates)
        raise DataNotFoundError(
            f"the {name} data set was not found. Looked in:\n  {looked}\n"
            f"Put the shared/ folder beside the project, pass --data-dir DIR (holding {spec.relative}), "
            f"or set {spec.env_var} to a parquet file, a KernelBench checkout or a folder of problems."
        )

    def _explicit_data_dir(self) -> tuple[Path, str] | None:
        """The data folder the user named (`--data-dir` first, then the environment), and how it was named."""
        if self.data_dir is not None:
            return Path(self.data_dir).expanduser(), f"--data-dir {self.data_dir}"
        if os.environ.get("CUDA_AGENT_DATA_DIR"):
            value = os.environ["CUDA_AGENT_DATA_DIR"]
            return Path(value).expanduser(), f"CUDA_AGENT_DATA_DIR={value}"
        return None

    def _load(self, source: str) -> list[Task]:
        if source == "examples":
            return sources.load_folder(EXAMPLES_DIR, source="examples")
        if source in _SETS:
            path = self.locate(source)
            if path.suffix == ".parquet":
                return sources.load_parquet(path, source)
            if source == "kernelbench" and path.is_dir():
                return sources.load_kernelbench_checkout(path, source)
            return [t.model_copy(update={"ref": f"{source}/{i}"}) for i, t in enumerate(sources.load_path(path))]
        path = Path(source).expanduser()
        if path.exists():  # refs as a user passes them back: `PATH::KEY` (a lone problem file: its path)
            prefix = f"{path}/"
            return [
                t.model_copy(update={"ref": f"{source}::{t.ref.removeprefix(prefix)}"})
                if t.ref.startswith(prefix)
                else t
                for t in sources.load_path(path)
            ]
        raise TaskError(f"unknown task set {source!r}: use one of {', '.join(SOURCES)} or a path")


def _default_data_dirs() -> list[Path]:
    project_root = Path(__file__).resolve().parents[2]
    return [project_root.parent / "shared", Path.cwd().parent / "shared", Path.cwd() / "shared"]


def _no_folder(said: str) -> str:
    return f"{said}: no such folder; give the folder that holds kernelbench/ and ops6k/"


def _explicit(path: Path, said: str, hint: str = "") -> Path:
    if not path.exists():
        raise DataNotFoundError(f"{said}: {path} does not exist {hint}".rstrip())
    return path


def _find(tasks: list[Task], ref: str, original: str) -> Task:
    for task in tasks:
        if task.ref == ref:
            return task
    # `kernelbench/L1/19_ReLU`: accept the file stem after the level as well as the bare number.
    parts = ref.rsplit("/", 1)
    if len(parts) == 2:
        for task in tasks:
            if task.ref.rsplit("/", 1)[0] == parts[0] and task.name == parts[1]:
                return task
        number = parts[1].split("_", 1)[0]
        if number != parts[1] and number.isdigit():
            return _find(tasks, f"{parts[0]}/{number}", original)
    examples = ", ".join(t.ref for t in tasks[:3])
    raise TaskError(f"no task {original!r} ({len(tasks)} tasks in that set, e.g. {examples})")
