"""The four filters on hand-written problems, in this process (the worker runs the same function)."""

from __future__ import annotations

import time

import pytest

from cuda_agent.judge.child.timing import Clock, make_flusher
from cuda_agent.synth.filters import FilterConfig, forward_source, run_filters

TEMPLATE = """
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(64))

    def forward(self, x):
        return {body}

def get_inputs():
    return [torch.randn(32, 64)]

def get_init_inputs():
    return []
"""


def _run(body: str, **config):
    clock = Clock(time.perf_counter, None, None)
    settings = {"min_ms": 0.0, "max_ms": 1e6, "compile": False} | config
    return run_filters(0, TEMPLATE.format(body=body), FilterConfig(**settings), clock, make_flusher("cpu", None))


def test_a_good_problem_passes() -> None:
    result = _run("torch.relu(x) * self.w")
    assert result.passed and result.reason is None
    assert result.eager_ms is not None and result.output_shape == [32, 64]
    # Where the worker's time went, for runs that are slower than they should be.
    assert set(result.stage_s) == {"runs_eager", "deterministic", "input_dependent", "time_window"}
    assert result.wall_s >= sum(result.stage_s.values()) > 0 and result.turn_wait_s == 0.0  # CPU: no turns


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("F.dropout(x, 0.5, training=True)", "deterministic"),
        ("x + torch.rand_like(x) * 0", "deterministic"),  # caught by name even though the values agree
        ("torch.zeros_like(x) + 1.0", "input_dependent"),  # constant
        ("torch.arange(x.shape[0], dtype=torch.float32)", "input_dependent"),  # varies, but not with the input
        ("x @ torch.ones(3, 3)", "runs_eager"),
    ],
)
def test_each_filter_rejects_with_its_reason(body: str, reason: str) -> None:
    result = _run(body)
    assert not result.passed and result.reason == reason


def test_time_window_rejects_a_problem_that_is_too_fast() -> None:
    result = _run("x * 2.0", min_ms=1e5)
    assert result.reason == "time_window" and result.eager_ms is not None and result.eager_ms < 1e5


def test_without_short_circuit_every_filter_is_evaluated() -> None:
    result = _run("torch.zeros_like(x) + 1.0", short_circuit=False, min_ms=1e5)
    assert result.reason == "input_dependent"
    assert result.checks == {"runs_eager": True, "deterministic": True, "input_dependent": False, "time_window": False}


def test_randomness_in_init_is_not_stochastic() -> None:
    code = TEMPLATE.format(body="x * self.w")
    assert "randn" not in forward_source(code)


OOM_ON_CALL = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls == {call}:
            raise RuntimeError("CUDA out of memory. Tried to allocate 8.00 GiB")
        return x * 2


def get_inputs():
    return [torch.randn(8, 8)]


def get_init_inputs():
    return []
"""


def _run_code(code: str):
    clock = Clock(time.perf_counter, None, None)
    config = FilterConfig(min_ms=0.0, max_ms=1e6, compile=False, short_circuit=False)
    return run_filters(0, code, config, clock, make_flusher("cpu", None))


def test_running_out_of_memory_is_no_verdict() -> None:
    # Workers share the device's memory: an allocation can fail for a neighbour's, so no filter fails.
    later = _run_code(OOM_ON_CALL.format(call=2))  # the deterministic check's second call
    assert later.reason == "out_of_memory" and not later.passed and later.detail.startswith("deterministic:")
    assert later.checks == {"runs_eager": True}
    first = _run_code(OOM_ON_CALL.format(call=1))
    assert first.reason == "out_of_memory" and first.checks == {} and first.detail.startswith("runs_eager:")
