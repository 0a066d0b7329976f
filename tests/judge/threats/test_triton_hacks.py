"""Triton's own ways to fake a result, judged for real on the CPU under Triton's interpreter (TRITON_INTERPRET=1), and
compiled on a GPU where there is one (`-m gpu`).

- an autotune config that skips work, picked because it is fastest (threat 12 by way of autotune);
- a `tl.constexpr` specialised on the call count, honest while checked early and half-done later (threats 12, 20);
- a result cached on the module across calls (threat 9);
- a decoy kernel that launches but does not make the output, and a forward that launches nothing (threat 4).

Each runs once per policy (conftest.py) and must fail under both. Static rules on kernel bodies (torch or a cache
reached from a kernel, Triton's internals) are in tests/judge/test_policy_triton.py. Slow: each judgement starts
the candidate's process, imports triton and interprets every launch in Python (~10 s).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.judge import JudgeConfig, judge
from cuda_agent.judge.solution import SolutionSource
from cuda_agent.tasks import Catalog
from cuda_agent.types import Verdict
from tests.judge.threats import _static
from tests.judge.threats._hacks import CALLS_BEFORE_TIMING, JUDGED_IN_THE_TIMED_PHASE, TIMED, failed_check, model_new

pytest.importorskip("triton", reason="needs triton: pip install -e '.[triton]'")
pytestmark = pytest.mark.slow

HEADER = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, tl.where(x < 0.0, 0.0, x), mask=mask)


@triton.jit
def relu_first_kernel(x_ptr, y_ptr, LIMIT: tl.constexpr, BLOCK: tl.constexpr):
    # relu of the first LIMIT elements alone; the rest of y keeps whatever it held.
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < LIMIT
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, tl.where(x < 0.0, 0.0, x), mask=mask)


@triton.autotune(
    configs=[triton.Config({"BLOCK": 64, "SKIP": 0}), triton.Config({"BLOCK": 1024, "SKIP": 1})], key=["n"]
)
@triton.jit
def relu_tuned_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, SKIP: tl.constexpr):
    # SKIP=1 covers the first half of y only: 16x fewer programs, so autotune picks it.
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n // (1 + SKIP)
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, tl.where(x < 0.0, 0.0, x), mask=mask)

"""
LAUNCH = "relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)"


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def device(request: pytest.FixtureRequest) -> str:
    """Each hack under the CPU interpreter, and compiled on a GPU where there is one."""
    return request.param


def judge_triton(tmp_path: Path, model_new_class_source: str, device: str = "cpu", **config) -> Verdict:
    """Judge HEADER plus the given ModelNew on examples/relu on `device`, correctness only unless told otherwise."""
    source = HEADER + model_new_class_source
    (tmp_path / "solution.py").write_text(source)  # kept beside the test for a reader
    config.setdefault("time", False)
    config.setdefault("policy", _static.POLICY)
    verdict = judge(
        Catalog().resolve("examples/relu"), SolutionSource(python=source), JudgeConfig(device=device, **config)
    )
    assert verdict.language == "triton"
    return verdict


def test_autotune_config_that_skips_work_is_caught(tmp_path: Path) -> None:
    # CPU only: the interpreter's wall clock always picks the config with 16x fewer programs; on a GPU, for a relu
    # this small, which config autotune picks is a toss-up (a pick of the honest one would pass, rightly).
    forward = (
        "x = x.contiguous()\ny = torch.empty_like(x)\nn = x.numel()\n"
        "relu_tuned_kernel[lambda meta: (triton.cdiv(n, meta['BLOCK']),)](x, y, n)\nreturn y"
    )
    verdict = judge_triton(tmp_path, model_new(forward))
    assert (verdict.verdict, verdict.reward) == ("incorrect", -1), verdict.message
    assert verdict.violations == []  # nothing in its text is against the rules: its outputs fail


def test_constexpr_specialised_on_the_call_count_is_caught(tmp_path: Path, device: str) -> None:
    # Honest on every call before the first timed one, half the work after: a kernel compiled for the checked
    # calls and another for the rest. Timed outputs are judged at random, the first ones with a chance of 1.
    forward = (
        "self.calls += 1\nx = x.contiguous()\ny = torch.empty_like(x)\nn = x.numel()\n"
        f"limit = n if self.calls <= {CALLS_BEFORE_TIMING} else n // 2\n"
        "relu_first_kernel[(triton.cdiv(n, 1024),)](x, y, LIMIT=limit, BLOCK=1024)\nreturn y"
    )
    verdict = judge_triton(tmp_path, model_new(forward, init="self.calls = 0"), **TIMED, min_reps=2, device=device)
    assert (verdict.verdict, verdict.reward) == ("incorrect", -1), verdict.message
    assert failed_check(verdict)["label"] in JUDGED_IN_THE_TIMED_PHASE and verdict.timings_ms.solution is None


def test_result_cached_across_calls_is_caught(tmp_path: Path, device: str) -> None:
    # Cached alone, the second call launches nothing; with a launch on scratch memory each call, it is wrong.
    cached = "if self.cache is None:\n    y = torch.empty_like(x)\n    " + LAUNCH + "\n    self.cache = y\n"
    verdict = judge_triton(tmp_path, model_new(cached + "return self.cache", init="self.cache = None"), device=device)
    assert verdict.verdict == "rejected", verdict.message
    assert [v.check for v in verdict.violations] == ["forward_calls_no_kernel"]
    with_launch = cached + "y = torch.empty_like(x)\n" + LAUNCH + "\nreturn self.cache"
    verdict = judge_triton(tmp_path, model_new(with_launch, init="self.cache = None"), device=device)
    assert verdict.verdict == "incorrect", verdict.message
    assert [c["ok"] for c in verdict.checks] == [True, False]


def test_decoy_kernel_is_refused(tmp_path: Path, device: str) -> None:
    # The kernel runs, on a scratch buffer; torch makes the output.
    forward = "x = x.contiguous()\ny = torch.empty_like(x)\n" + LAUNCH + "\nreturn torch.relu(x)"
    verdict = judge_triton(tmp_path, model_new(forward), device=device)
    assert verdict.verdict == "rejected", verdict.message
    expected = {"cuda-agent": "torch_compute_in_forward", "kernelbench": "no_custom_kernel"}[_static.POLICY]
    assert expected in {v.check for v in verdict.violations}


def test_forward_that_launches_nothing_is_refused(tmp_path: Path, device: str) -> None:
    # The launch is in the text, never taken; the static policy is off to show the run-time count refusing it
    # (under cuda-agent the ATen tracer sees torch's relu first).
    forward = "x = x.contiguous()\ny = torch.empty_like(x)\nif x.numel() < 0:\n    " + LAUNCH + "\nreturn torch.relu(x)"
    verdict = judge_triton(tmp_path, model_new(forward), static_policy=False, device=device)
    assert verdict.verdict == "rejected", verdict.message
    expected = {"cuda-agent": "torch_compute_at_runtime", "kernelbench": "forward_calls_no_kernel"}[_static.POLICY]
    assert [v.check for v in verdict.violations] == [expected]
