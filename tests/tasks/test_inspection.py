from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.errors import TaskError
from cuda_agent.tasks import Catalog
from cuda_agent.tasks.inspection import inspect_task, machine_memory
from cuda_agent.tasks.sources import load_file
from tests.user import cli, cli_on_terminal

GOOD = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w = nn.Parameter(torch.randn(n))

    def forward(self, x):
        return x * self.w, x.sum()

def get_inputs():
    return [torch.randn(4, 8)]

def get_init_inputs():
    return [8]
"""


def _task(tmp_path: Path, code: str):
    path = tmp_path / "problem.py"
    path.write_text(code)
    return load_file(path)


def test_inspect_reports_shapes_parameters_and_determinism(tmp_path: Path) -> None:
    result = inspect_task(_task(tmp_path, GOOD))
    assert [s.shape for s in result.inputs] == [[4, 8]]
    assert [(s.shape, s.dtype) for s in result.outputs] == [([4, 8], "torch.float32"), ([], "torch.float32")]
    assert result.init_inputs[0].repr == "8"
    assert result.parameter_count == 8
    assert result.deterministic and result.input_dependent


def test_inspect_real_kernelbench_task(shared_dir: Path) -> None:
    result = inspect_task(Catalog(data_dir=shared_dir).resolve("kernelbench/L3/32"))
    assert result.outputs[0].shape == [10, 1000]
    assert result.parameter_count > 1_000_000


def test_inspect_flags_stochastic_outputs(tmp_path: Path) -> None:
    code = GOOD.replace("return x * self.w, x.sum()", "return torch.rand_like(x), torch.zeros(3)")
    result = inspect_task(_task(tmp_path, code))
    assert not result.deterministic


@pytest.mark.parametrize(
    ("code", "cause"),
    [
        ("def broken(:\n", "syntax error at line 1"),
        ("import torch\ndef get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n", "missing Model"),
        (GOOD.replace("return [torch.randn(4, 8)]", "raise ValueError('bad shape')"), "get_inputs() raised ValueError"),
        (GOOD.replace("return x * self.w, x.sum()", "return x @ x"), "Model.forward raised RuntimeError"),
        ("import no_such_module_xyz\n", "ModuleNotFoundError"),
    ],
)
def test_broken_problem_gives_one_line_error(tmp_path: Path, code: str, cause: str) -> None:
    with pytest.raises(TaskError) as info:
        inspect_task(_task(tmp_path, code))
    message = str(info.value)
    assert "problem.py" in message and cause in message
    assert "\n" not in message


def _huge(expression: str) -> str:
    """GOOD with inputs of `expression` floats: twice this machine's memory, so it can never fit."""
    total = machine_memory().total
    return GOOD.replace("return [torch.randn(4, 8)]", f"return [{expression.format(n=total // 2)}]").replace(
        "return x * self.w, x.sum()", "return x.relu()"
    )


def test_a_task_too_big_for_memory_is_refused_before_it_runs(tmp_path: Path) -> None:
    # Sized on the meta device: nothing is allocated, the answer comes at once and says what to do.
    done = cli("tasks", "show", _task(tmp_path, _huge("torch.rand({n})")).ref, "--inspect")
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1
    total_gib = machine_memory().total / 2**30
    assert f"needs about {10 * total_gib:.1f} GiB (inputs drawn twice, three outputs)" in done.stderr
    assert f"this machine has {total_gib:.1f} GiB" in done.stderr and "Inspect it on a machine" in done.stderr


def test_an_allocation_past_the_cap_fails_in_the_child_not_the_machine(tmp_path: Path) -> None:
    # An explicit CPU tensor is allocated for real even while sizing on the meta device: the cap stops it.
    done = cli("tasks", "show", str(_task(tmp_path, _huge("torch.empty({n}, device='cpu')")).ref), "--inspect")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"one allocation of {machine_memory().total * 2 / 2**30:.1f} GiB failed" in done.stderr
    assert "this machine has" in done.stderr and "the inspection may use" in done.stderr


def test_inspect_shows_progress_on_a_terminal_and_json_stays_clean() -> None:
    code, stdout, terminal = cli_on_terminal("tasks", "show", "examples/relu", "--inspect")
    assert code == 0 and "inspecting examples/relu" in terminal and "eager forward:" in stdout
    code, stdout, terminal = cli_on_terminal("tasks", "show", "examples/relu", "--inspect", "--json")
    assert code == 0 and json.loads(stdout)["inspection"]["outputs"][0]["shape"] == [128, 1024]
    assert "inspecting" not in terminal


def test_inspect_on_cuda_without_a_gpu_says_so(capsys: pytest.CaptureFixture) -> None:
    """Issue 41: it said the task's get_inputs() raised; the device is refused at once, as `judge` does."""
    from cuda_agent.cli import main
    from cuda_agent.machine import detect_device

    if detect_device("auto") == "cuda":
        pytest.skip("this machine has a GPU")
    assert main(["tasks", "show", "examples/relu", "--inspect", "--device", "cuda"]) == 2
    assert capsys.readouterr().err == (
        "error: --device cuda: no GPU is visible on this machine; use --device cpu or auto\n"
    )
