"""The composer: seeded, valid shapes, Ops-6K's depth mix."""

from __future__ import annotations

from collections import Counter

import pytest

from cuda_agent.synth.catalog import probe
from cuda_agent.synth.compose import OPS6K_DEPTH_MIX, ComposeConfig, compose, resize
from cuda_agent.synth.pipeline import candidate_depth, depth_quota
from cuda_agent.tasks.problem import call_inputs, load_problem

NAMES = [
    ("nn.Conv2d", "module"),
    ("nn.GroupNorm", "module"),
    ("nn.Linear", "module"),
    ("torch.relu", "function"),
    ("torch.sum", "function"),
    ("F.softmax", "function"),
    ("torch.cumsum", "function"),
    ("nn.MaxPool2d", "module"),
]


@pytest.fixture(scope="module")
def ops():
    return [probe(name, kind) for name, kind in NAMES]


SMALL = ComposeConfig(min_numel=2048, max_numel=8192)


def test_same_seed_and_index_give_the_same_problem(ops) -> None:
    assert compose(ops, 7, 3, SMALL) == compose(ops, 7, 3, SMALL)
    assert compose(ops, 7, 3, SMALL).code != compose(ops, 7, 4, SMALL).code


def test_composed_problems_run_and_have_the_kernelbench_shape(ops) -> None:
    import torch

    for index in range(12):
        candidate = compose(ops, 0, index, SMALL.model_copy(update={"depth_mix": {3: 1.0}}))
        assert candidate is not None and len(candidate.ops) == 3
        problem = load_problem(candidate.code, "c.py", register=False)
        model = problem.Model(*call_inputs(problem, "c.py", "get_init_inputs"))
        out = model(*problem.get_inputs())
        assert isinstance(out, torch.Tensor)
        assert "batch_size = " in candidate.code


def test_resize_scales_the_batch_and_keeps_every_other_size(ops) -> None:
    import math

    candidate = next(c for i in range(40) if (c := compose(ops, 0, i, SMALL)) is not None and c.ops[0] == "nn.Conv2d")
    problem = load_problem(candidate.code, "c.py", register=False)
    (x,) = problem.get_inputs()
    resized = resize(candidate.code, 4.0, 10**9)
    assert resized is not None
    code, scale = resized
    bigger = load_problem(code, "r.py", register=False)
    (y,) = bigger.get_inputs()
    assert scale == 4.0 and y.shape == (4 * x.shape[0], *x.shape[1:])
    assert call_inputs(bigger, "r.py", "get_init_inputs") == call_inputs(problem, "c.py", "get_init_inputs")
    model = bigger.Model(*call_inputs(bigger, "r.py", "get_init_inputs"))
    assert model(y).shape[0] == y.shape[0]  # the chain still fits

    # The cap on input elements wins over the factor; below 1.5x it is not worth a second try.
    capped = resize(candidate.code, 100.0, 2 * x.numel())
    assert (
        capped is not None
        and capped[1] <= 2.0
        and math.prod(load_problem(capped[0], "k.py", register=False).get_inputs()[0].shape) <= 2 * x.numel()
    )
    assert resize(candidate.code, 100.0, x.numel()) is None
    assert resize("import torch\n\ndef get_inputs():\n    return [torch.randn(4)]\n", 4.0, 10**9) is None


def test_depth_mix_follows_ops6k_by_default() -> None:
    # Ops-6K's 1.18 % of transformers modules are not composed: the 1-5 mix is renormalised to 100 %.
    total = sum(OPS6K_DEPTH_MIX.values())
    counts = Counter(candidate_depth(0, i, OPS6K_DEPTH_MIX) for i in range(20000))
    for depth, percent in OPS6K_DEPTH_MIX.items():
        assert abs(100 * counts[depth] / 20000 - 100 * percent / total) < 1.0


@pytest.mark.parametrize("n", [1, 7, 2000])
def test_depth_quota_sums_to_n(n: int) -> None:
    quota = depth_quota(n, OPS6K_DEPTH_MIX)
    assert sum(quota.values()) == n
    assert quota[2] == max(quota.values())


def test_operators_with_huge_weights_are_not_drawn() -> None:
    cell = [probe("nn.RNNCell", "module")]
    wide = ComposeConfig(min_numel=8 * 50_000, max_numel=8 * 50_000, depth_mix={1: 1.0}, attempts=30)
    assert compose(cell, 0, 0, wide.model_copy(update={"max_params": 2**20})) is None
    assert compose(cell, 0, 0, wide.model_copy(update={"max_params": 2**40})) is not None
