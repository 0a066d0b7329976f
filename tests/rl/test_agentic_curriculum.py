"""The agentic curriculum: its problems run, held-out tasks are set apart, and its kernels earn their verdicts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cuda_agent.rl import agentic_curriculum as ac
from cuda_agent.rl.single_turn import write_candidate


def test_at_least_ten_tasks_three_held_out_one_of_each_family() -> None:
    train, held = ac.split(held_out=False), ac.split(held_out=True)
    assert len(ac.TASKS) >= 10 and len(held) >= 3 and len(train) + len(held) == len(ac.TASKS)
    assert {t.name for t in train}.isdisjoint(t.name for t in held)
    families = {(len(t.args), t.rows) for t in train}
    assert {(len(t.args), t.rows) for t in held} <= families  # nothing held out is unlike everything trained on


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("task", ac.TASKS, ids=lambda t: t.name)
def test_problem_runs_in_kernelbench_format(task: ac.AgenticTask, device: str) -> None:
    space: dict = {}
    exec(compile(ac.problem(task, device).code, task.ref, "exec"), space)  # noqa: S102 - our own template
    if device == "cuda":  # the CUDA sizes are 128 MiB a tensor: run the reference on a slice only
        inputs = [x[:4] for x in space["get_inputs"]()]
    else:
        inputs = space["get_inputs"]()
    out = space["Model"](*space["get_init_inputs"]())(*inputs)
    assert out.shape == (inputs[0].shape[:1] if task.rows else inputs[0].shape) and out.dtype == torch.float32


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_kernels_differ_where_designed(device: str) -> None:
    for task in ac.TASKS:
        files = {k: ac.kernel_files(task, k, device) for k in ac.KERNELS}
        kernel = f"kernels/{task.name}.{'cpp' if device == 'cpu' else 'cu'}"
        assert all(kernel in f for f in files.values())
        assert len({f[kernel] for f in files.values()}) == len(ac.KERNELS)
        assert "d[" in files["broken"][kernel] and "d[" not in files["fast"][kernel]
        assert task.wrong in files["wrong"][kernel] and task.expr in files["fast"][kernel]


@pytest.mark.slow
@pytest.mark.integration
def test_cpu_kernels_earn_their_verdicts(tmp_path: Path) -> None:
    """The real judge on the CPU, one fused-pair task: fast and slow pass (slow slower), broken does not build,
    wrong is incorrect. About two minutes on two busy cores."""
    task = ac.task_named("add_relu")
    problem = tmp_path / "problem.py"
    problem.write_text(ac.problem(task, "cpu").code)
    verdicts = {}
    for kernel in ac.KERNELS:
        folder = write_candidate({**ac.kernel_files(task, kernel, "cpu"), "model_new.py": ac.model_new(task)},
                                 tmp_path / kernel)  # fmt: skip
        run = subprocess.run(
            [sys.executable, "-m", "cuda_agent", "judge", "--device", "cpu", "--json", str(problem), str(folder)],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        verdicts[kernel] = json.loads(run.stdout)
    assert {k: v["verdict"] for k, v in verdicts.items()} == {
        "fast": "pass", "slow": "pass", "broken": "compile_error", "wrong": "incorrect",
    }  # fmt: skip
    assert verdicts["slow"]["timings_ms"]["solution"] > 2 * verdicts["fast"]["timings_ms"]["solution"]
    assert "was not declared" in verdicts["broken"]["compile_log"]
