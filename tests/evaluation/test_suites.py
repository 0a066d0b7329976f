"""Suite selection and solution naming."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.errors import ConfigError
from cuda_agent.evaluation.suites import find_solution, select_tasks, solutions_dir
from cuda_agent.tasks import Catalog


def test_kernelbench_suites_and_level_filter(shared_dir: Path) -> None:
    catalog = Catalog(data_dir=shared_dir)
    assert len(select_tasks("kernelbench", catalog=catalog)) == 250
    assert len(select_tasks("kernelbench/L2", catalog=catalog)) == 100
    assert {t.level for t in select_tasks("kernelbench", [1, 3], catalog)} == {1, 3}
    assert [t.ref for t in select_tasks("ops6k[10:13]", catalog=catalog)] == ["ops6k/10", "ops6k/11", "ops6k/12"]
    assert [t.ref for t in select_tasks("kernelbench/L1/19,kernelbench/L2/1", catalog=catalog)] == [
        "kernelbench/L1/19",
        "kernelbench/L2/1",
    ]
    with pytest.raises(ConfigError, match="has no tasks"):
        select_tasks("kernelbench/L2", [1], catalog)


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (["level_1_problem_19_sample_0_kernel.py", "level_1_problem_190.py"], "level_1_problem_19_sample_0_kernel.py"),
        (["L1/19.py", "L1/190.py"], "L1/19.py"),
        (["L1/19_ReLU.py"], "L1/19_ReLU.py"),
        (["level_1_problem_190.py", "L2/19.py"], None),
    ],
)
def test_finds_kernelbench_solution_names(tmp_path: Path, files: list[str], expected: str | None) -> None:
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    task = Catalog().resolve("examples/relu").model_copy(update={"level": 1, "problem_id": 19})
    found = find_solution(task, tmp_path)
    assert (found.relative_to(tmp_path).as_posix() if found else None) == expected


def test_examples_solutions_follow_the_device() -> None:
    task = Catalog().resolve("examples/relu")
    assert find_solution(task, solutions_dir("examples", "cpu")).parent.name == "cpu"
    assert find_solution(task, solutions_dir("examples", "cuda")).parent.name == "cuda"
    with pytest.raises(ConfigError, match="no such folder"):
        solutions_dir("/nonexistent/solutions", "cpu")
