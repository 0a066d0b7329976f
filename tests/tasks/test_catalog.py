from __future__ import annotations

import collections
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cuda_agent.cli import main
from cuda_agent.errors import DataNotFoundError, TaskError
from cuda_agent.tasks import Catalog
from cuda_agent.tasks import catalog as catalog_module
from cuda_agent.tasks.sources import load_path
from tests.user import cli


def test_kernelbench_parquet_has_250_tasks_by_level(shared_dir: Path) -> None:
    tasks = Catalog(data_dir=shared_dir).tasks("kernelbench")
    assert collections.Counter(t.level for t in tasks) == {1: 100, 2: 100, 3: 50}
    assert tasks[0].ref == "kernelbench/L1/1"


def test_ops6k_has_published_mix(shared_dir: Path) -> None:
    tasks = Catalog(data_dir=shared_dir).tasks("ops6k")
    mix = collections.Counter(t.metadata["data_source"] for t in tasks)
    assert len(tasks) == 6000
    assert mix == {"torch#1": 204, "torch#2": 5026, "torch#3": 457, "torch#4": 168, "torch#5": 74, "transformers": 71}
    assert tasks[0].metadata["ops"] == ["nn.BatchNorm3d", "torch.diag", "torch.max", "nn.Parameter"]


@pytest.mark.parametrize(
    ("ref", "name"),
    [
        ("kernelbench/L1/19", "19_ReLU"),
        ("kernelbench/L1/19_ReLU", "19_ReLU"),
        ("kernelbench/L2/12", "12_Gemm_Multiply_LeakyReLU"),
        ("examples/relu", "relu"),
    ],
)
def test_resolve_named_refs(shared_dir: Path, ref: str, name: str) -> None:
    assert Catalog(data_dir=shared_dir).resolve(ref).name == name


def test_resolve_ops6k_row(shared_dir: Path) -> None:
    task = Catalog(data_dir=shared_dir).resolve("ops6k/123")
    assert task.problem_id == 123
    assert "class Model" in task.code


def test_resolve_py_path(tmp_path: Path) -> None:
    problem = tmp_path / "p.py"
    problem.write_text((Path(__file__).parents[2] / "cuda_agent/tasks/examples/problems/relu.py").read_text())
    task = Catalog().resolve(str(problem))
    assert (task.source, task.name) == ("file", "p")


@pytest.mark.parametrize("ref", ["kernelbench/L1/999", "kernelbench/L9/1", "ops6k/6000", "nosuchset/1", "missing.py"])
def test_unknown_refs_raise_task_error(shared_dir: Path, ref: str) -> None:
    with pytest.raises(TaskError):
        Catalog(data_dir=shared_dir).resolve(ref)


def test_missing_data_set_names_where_it_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_AGENT_DATA_DIR", raising=False)
    monkeypatch.delenv("CUDA_AGENT_KERNELBENCH", raising=False)
    # The checkout's own ../shared would be found; point the default lookup away from it.
    monkeypatch.setattr(catalog_module, "_default_data_dirs", lambda: [tmp_path / "nowhere"])
    with pytest.raises(DataNotFoundError, match="--data-dir"):
        Catalog().tasks("kernelbench")


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (["--data-dir", "/nonexistent"], {}, "--data-dir /nonexistent: no such folder"),
        ([], {"CUDA_AGENT_DATA_DIR": "/nonexistent"}, "CUDA_AGENT_DATA_DIR=/nonexistent: no such folder"),
        ([], {"CUDA_AGENT_KERNELBENCH": "/nonexistent.parquet"}, "CUDA_AGENT_KERNELBENCH=/nonexistent.parquet"),
    ],
)
def test_a_data_location_given_but_missing_is_an_error(
    shared_dir: Path, args: list[str], env: dict[str, str], named: str
) -> None:
    # ../shared/ exists beside the checkout: the command must not fall back to it.
    done = cli(*args, "tasks", "list", "kernelbench", env=env)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"error: {named}") and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("name", ["kernelbench", "ops6k"])
def test_a_data_location_that_is_a_file_but_not_parquet_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """Issue 41: a text file as CUDA_AGENT_KERNELBENCH ended in NotADirectoryError (a KernelBench checkout was
    assumed); it is a TaskError of one line, as for Ops-6K."""
    notes = tmp_path / "notes.txt"
    notes.write_text("not a data set\n")
    monkeypatch.setenv(f"CUDA_AGENT_{name.upper()}", str(notes))
    with pytest.raises(TaskError, match=f"^{notes}: expected a .parquet file") as raised:
        Catalog().tasks(name)
    assert len(str(raised.value).splitlines()) == 1


def test_a_data_dir_without_the_set_is_an_error(shared_dir: Path, tmp_path: Path) -> None:
    done = cli("--data-dir", str(tmp_path), "tasks", "show", "kernelbench/L1/19")
    assert done.returncode == 2
    assert "kernelbench/kernelbench_l1-3.parquet does not exist" in done.stderr and "Traceback" not in done.stderr


def test_env_var_overrides_kernelbench_location(shared_dir: Path, tmp_path: Path, monkeypatch) -> None:
    rows = pq.read_table(shared_dir / "kernelbench/kernelbench_l1-3.parquet").to_pylist()[:3]
    small = tmp_path / "kb.parquet"
    pq.write_table(pa.Table.from_pylist(rows), small)
    monkeypatch.setenv("CUDA_AGENT_KERNELBENCH", str(small))
    assert len(Catalog().tasks("kernelbench")) == 3


def test_kernelbench_checkout_layout(shared_dir: Path, tmp_path: Path) -> None:
    rows = pq.read_table(shared_dir / "kernelbench/kernelbench_l1-3.parquet").to_pylist()
    for row in rows[:2] + rows[100:101]:
        folder = tmp_path / "KernelBench" / f"level{row['level']}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{row['name']}.py").write_text(row["code"])
    tasks = load_path(tmp_path)
    assert [(t.level, t.problem_id) for t in tasks] == [(1, 1), (1, 2), (2, 1)]
    assert Catalog().resolve(f"{tmp_path}::L2/1").name == rows[100]["name"]


def test_folder_of_problem_files(tmp_path: Path) -> None:
    examples = Path(__file__).parents[2] / "cuda_agent/tasks/examples/problems"
    shutil.copytree(examples, tmp_path / "mine")
    tasks = load_path(tmp_path / "mine")
    assert {t.name for t in tasks} >= {"relu", "softmax", "matmul"}
    assert Catalog().resolve(f"{tmp_path / 'mine'}::relu").name == "relu"


def test_ops6k_layout_parquet_from_user_path(shared_dir: Path, tmp_path: Path) -> None:
    rows = pq.read_table(shared_dir / "ops6k/ops6k.parquet").to_pylist()[:5]
    path = tmp_path / "mine.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    tasks = Catalog().tasks(str(path))
    assert len(tasks) == 5 and tasks[4].ref == f"{path}::4"  # what a user passes back (issue 41: it was `PATH/4`)
    assert Catalog().resolve(tasks[4].ref) == tasks[4]


def test_parquet_with_other_columns_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.Table.from_pylist([{"a": 1}]), path)
    with pytest.raises(TaskError, match="neither"):
        load_path(path)


def test_cli_lists_kernelbench_as_json(shared_dir: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["--data-dir", str(shared_dir), "tasks", "list", "kernelbench", "--level", "3", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 50 and {"ref", "name", "level"} <= rows[0].keys()


def test_cli_unknown_ref_is_one_line_error(capsys: pytest.CaptureFixture) -> None:
    assert main(["tasks", "show", "kernelbench/L1/0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err


@pytest.mark.parametrize(
    ("source", "has_ops", "has_level"),
    [("kernelbench", False, True), ("ops6k", True, False), ("examples", False, False)],
)
def test_cli_table_shows_ops_and_levels_only_for_sets_that_have_them(
    shared_dir: Path, source: str, has_ops: bool, has_level: bool
) -> None:
    done = cli("tasks", "list", source, env={"COLUMNS": "200"})
    assert done.returncode == 0
    header = next(line for line in done.stdout.splitlines() if " ref " in line)
    assert ("ops" in header.split()) == has_ops
    assert ("level" in header.split()) == has_level  # issue 41: a blank column for examples and Ops-6K
    if has_ops:
        assert "nn.BatchNorm3d, torch.diag" in done.stdout
