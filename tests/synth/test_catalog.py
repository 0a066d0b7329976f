"""The catalogue learns operators by probing them on small CPU tensors."""

from __future__ import annotations

import pytest

from cuda_agent.synth.catalog import OpSpec, RejectedOp, build_op, probe


def test_conv_module_binds_channels_and_runs_on_4d() -> None:
    spec = probe("nn.Conv2d", "module")
    assert isinstance(spec, OpSpec)
    assert spec.ctor_args["in_channels"] == "C" and spec.ctor_args["kernel_size"] == "3"
    assert spec.ranks == [4] and spec.shape_rule == "resize" and not spec.stochastic


@pytest.mark.parametrize(
    ("name", "kind", "rule"),
    [("torch.relu", "function", "same"), ("torch.sum", "function", "reduce"), ("F.softmax", "function", "same")],
)
def test_shape_rules_are_learnt(name: str, kind: str, rule: str) -> None:
    spec = probe(name, kind)
    assert isinstance(spec, OpSpec)
    assert spec.shape_rule == rule and {2, 3, 4, 5} <= set(spec.ranks)


def test_dropout_is_stochastic() -> None:
    spec = probe("nn.Dropout", "module")
    assert isinstance(spec, OpSpec) and spec.stochastic


@pytest.mark.parametrize(
    ("name", "kind", "reason"),
    [
        ("torch.zeros_like", "function", "does not depend on the input"),
        ("nn.Embedding", "module", "'num_embeddings' has no binding rule"),
        ("nn.L1Loss", "module", "did not run"),
        ("Tensor.contiguous", "method", "identity"),
    ],
)
def test_undescribable_candidates_are_listed_with_a_reason(name: str, kind: str, reason: str) -> None:
    result = probe(name, kind)
    assert isinstance(result, RejectedOp)
    assert reason in result.reason


def test_build_op_uses_the_learnt_call_arguments() -> None:
    import torch

    spec = probe("torch.cumsum", "function")
    assert isinstance(spec, OpSpec) and spec.call_args == "dim=1"
    x = torch.ones(2, 3)
    assert build_op(spec, (2, 3))(x).tolist() == [[1, 2, 3], [1, 2, 3]]
