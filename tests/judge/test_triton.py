"""Triton solutions through every stage of the judge: on the CPU under Triton's interpreter, on a GPU compiled.

Slow: each judgement starts the candidate's process, imports triton and interprets every launch (~5-20 s).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.judge import JudgeConfig, judge
from cuda_agent.judge.policy import POLICIES
from cuda_agent.judge.solution import SolutionSource
from cuda_agent.tasks import Catalog
from cuda_agent.types import Task
from tests.judge.helpers import EXAMPLES, ROOT

pytest.importorskip("triton", reason="needs triton: pip install -e '.[triton]'")

TRITON_SOLUTIONS = EXAMPLES / "solutions" / "triton"
KERNELBENCH_TRITON = ROOT / "solutions" / "kernelbench_triton"
SHRUNK = {
    "L1/19": {"batch_size = 4096": "batch_size = 4", "dim = 393216": "dim = 1000"},
    "L1/20": {"batch_size = 4096": "batch_size = 4", "dim = 393216": "dim = 1000"},
    "L1/21": {"batch_size = 4096": "batch_size = 4", "dim = 393216": "dim = 1000"},
    "L1/23": {"batch_size = 4096": "batch_size = 4", "dim = 393216": "dim = 5000"},
    "L1/26": {"batch_size = 4096": "batch_size = 4", "dim = 393216": "dim = 1000"},
    "L2/12": {
        "batch_size = 1024": "batch_size = 16",
        "in_features  = 8192": "in_features = 96",
        "out_features = 8192": "out_features = 80",
    },
}
"""KernelBench problems with the solutions in solutions/kernelbench_triton/, their sizes shrunk for the CPU
interpreter (the Model and get_inputs unchanged): each replacement must apply."""


@pytest.mark.slow
@pytest.mark.parametrize("policy", POLICIES)
def test_triton_relu_passes_timed_on_the_cpu_interpreter(policy: str) -> None:
    config = JudgeConfig(device="cpu", policy=policy, verdict_cache=False)
    verdict = judge(Catalog().resolve("examples/relu"), TRITON_SOLUTIONS / "relu.py", config)
    assert (verdict.verdict, verdict.language) == ("pass", "triton"), verdict.message
    assert verdict.reward >= 1 and verdict.timings_ms.solution > 0
    assert verdict.env["triton_interpret"] is True
    # Triton's cache lay in the candidate's own folder of this judgement, which no other judgement shares.
    assert Path(verdict.env["triton_cache_dir"]).parent.name == "candidate"
    assert verdict.custom_kernel_time_fraction is not None and verdict.custom_kernel_time_fraction > 0.5


@pytest.mark.slow
def test_every_triton_example_is_correct_on_the_cpu_interpreter() -> None:
    folders = set()
    for path in sorted(TRITON_SOLUTIONS.glob("*.py")):
        config = JudgeConfig(device="cpu", time=False, verdict_cache=False, robustness_trials=False, trials=2)
        verdict = judge(Catalog().resolve(f"examples/{path.stem}"), path, config)
        assert verdict.verdict == "pass", f"{path.stem}: {verdict.message}"
        folders.add(verdict.env["triton_cache_dir"])
    assert len(folders) == len(list(TRITON_SOLUTIONS.glob("*.py")))  # never one cache for two judgements


def _shrunk(ref: str) -> Task:
    task = Catalog().resolve(f"kernelbench/{ref}")
    code = task.code
    for old, new in SHRUNK[ref].items():
        assert old in code, (ref, old)
        code = code.replace(old, new)
    return task.model_copy(update={"code": code, "ref": f"{task.ref} (shrunk)"})


@pytest.mark.slow
def test_kernelbench_triton_solutions_are_correct_on_shrunk_problems(shared_dir: Path) -> None:
    assert sorted(SHRUNK) == sorted(f"{p.parent.name}/{p.stem}" for p in KERNELBENCH_TRITON.glob("L*/*.py"))
    for ref in SHRUNK:
        config = JudgeConfig(device="cpu", time=False, verdict_cache=False, robustness_trials=False, trials=2)
        verdict = judge(_shrunk(ref), KERNELBENCH_TRITON / f"{ref}.py", config)
        assert (verdict.verdict, verdict.language) == ("pass", "triton"), f"{ref}: {verdict.message}"


def _relu_with(old: str, new: str) -> SolutionSource:
    source = (TRITON_SOLUTIONS / "relu.py").read_text()
    assert old in source
    return SolutionSource(python=source.replace(old, new))


ODD_RANGE = ("tl.arange(0, BLOCK)", "tl.arange(0, 1000)")
"""relu.py with a kernel Triton's compiler refuses (ranges are powers of 2) and its interpreter would run."""
NO_N = ("](x, y, n, BLOCK=1024)", "](x, y, BLOCK=1024)")
"""relu.py launching its kernel without an argument: refused at the launch, before any compile."""


@pytest.mark.slow
def test_triton_compile_error_is_a_compile_error_with_the_compilers_message() -> None:
    config = JudgeConfig(device="cpu", time=False, verdict_cache=False, robustness_trials=False, trials=1)
    relu = Catalog().resolve("examples/relu")
    verdict = judge(relu, _relu_with(*ODD_RANGE), config)
    assert (verdict.verdict, verdict.reward, verdict.language) == ("compile_error", -1, "triton"), verdict.message
    assert verdict.message.endswith("(trial)")  # the first launch, and so its compile, is a trial's: never timed
    assert "relu_kernel" in verdict.compile_log and "arange's range must be a power of 2" in verdict.compile_log
    assert "tl.arange(0, 1000)" in verdict.compile_log  # the line, as the compiler shows it
    # A launch that fails before compiling is the candidate's runtime_error, as it is on a GPU.
    verdict = judge(relu, _relu_with(*NO_N), config)
    assert (verdict.verdict, verdict.compile_log) == ("runtime_error", None), verdict.message


@pytest.mark.gpu
def test_triton_compile_error_is_a_compile_error_on_the_gpu() -> None:
    verdict = judge(Catalog().resolve("examples/relu"), _relu_with(*ODD_RANGE), JudgeConfig(device="cuda"))
    assert (verdict.verdict, verdict.reward) == ("compile_error", -1), verdict.message
    assert "arange's range must be a power of 2" in verdict.compile_log
    assert verdict.env["triton_interpret"] is False


@pytest.mark.gpu
@pytest.mark.parametrize("ref", sorted(SHRUNK))
def test_kernelbench_triton_solution_passes_on_the_gpu(ref: str, shared_dir: Path) -> None:
    task = Catalog().resolve(f"kernelbench/{ref}")
    verdict = judge(task, KERNELBENCH_TRITON / f"{ref}.py", JudgeConfig(device="cuda"))
    assert (verdict.verdict, verdict.language) == ("pass", "triton"), verdict.message
    assert verdict.reward >= 1


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(p.stem for p in TRITON_SOLUTIONS.glob("*.py")))
def test_triton_example_passes_on_the_gpu(name: str) -> None:
    verdict = judge(Catalog().resolve(f"examples/{name}"), TRITON_SOLUTIONS / f"{name}.py", JudgeConfig(device="cuda"))
    assert (verdict.verdict, verdict.language) == ("pass", "triton"), verdict.message
    assert verdict.env["triton_interpret"] is False and verdict.reward >= 1


@pytest.mark.slow
def test_cpu_compile_baseline_works_with_triton_importable(tmp_path: Path) -> None:
    # torch's compiler looks for triton; on a machine without a GPU it must still take its C++ backend.
    from cuda_agent.judge import reference_timings

    base = reference_timings(Catalog().resolve("examples/softmax"), JudgeConfig(device="cpu", cache_dir=tmp_path))
    assert base.compile_error is None and base.compile is not None and base.compile["median_ms"] > 0
