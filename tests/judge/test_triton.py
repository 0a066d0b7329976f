"""Triton solutions through every stage of the judge: on the CPU under Triton's interpreter, on a GPU compiled.

Slow: each judgement starts the candidate's process, imports triton and interprets every launch (~5-20 s).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.judge import JudgeConfig, judge
from cuda_agent.judge.policy import POLICIES
from cuda_agent.tasks import Catalog
from tests.judge.helpers import EXAMPLES

pytest.importorskip("triton", reason="needs triton: pip install -e '.[triton]'")

TRITON_SOLUTIONS = EXAMPLES / "solutions" / "triton"


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


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(p.stem for p in TRITON_SOLUTIONS.glob("*.py")))
def test_triton_example_passes_on_the_gpu(name: str) -> None:
    verdict = judge(Catalog().resolve(f"examples/{name}"), TRITON_SOLUTIONS / f"{name}.py", JudgeConfig(device="cuda"))
    assert (verdict.verdict, verdict.language) == ("pass", "triton"), verdict.message
    assert verdict.env["triton_interpret"] is False and verdict.reward >= 1
