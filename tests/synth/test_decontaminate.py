"""Structural similarity, operator signatures and duplicate keys."""

from __future__ import annotations

from cuda_agent.synth.decontaminate import (
    StructureIndex,
    exact_key,
    near_key,
    operator_signature,
    similarity,
    structure_tokens,
)

KB = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Conv then ReLU."""
    def __init__(self, in_channels, out_channels, kernel_size):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        x = self.conv(x)
        return torch.relu(x)

batch_size = 16
def get_inputs():
    return [torch.randn(batch_size, 3, 32, 32)]
def get_init_inputs():
    return [3, 16, 3]
'''

RENAMED = KB.replace("self.conv", "self.c").replace("x)", "y)").replace("x =", "y =").replace("(x", "(y")
RENAMED = RENAMED.replace('"""Conv then ReLU."""', "").replace("batch_size = 16", "batch_size = 64")
OTHER = KB.replace("torch.relu(x)", "torch.softmax(torch.sigmoid(x) * 2.0, dim=1)")


def test_renamed_copy_is_structurally_identical() -> None:
    assert similarity(structure_tokens(KB), structure_tokens(RENAMED)) == 1.0


def test_a_different_operator_lowers_similarity() -> None:
    assert similarity(structure_tokens(KB), structure_tokens(OTHER)) < 0.9


def test_index_finds_the_nearest_problem() -> None:
    index = StructureIndex([("kb/1", OTHER), ("kb/2", KB)])
    nearest = index.nearest(RENAMED, at_least=0.9)
    assert nearest.ref == "kb/2" and nearest.similarity == 1.0


def test_operator_spellings_share_one_signature() -> None:
    spellings = ["F.relu(x)", "torch.relu(x)", "x.relu()", "nn.ReLU()(x)"]
    for call in spellings:
        code = KB.replace("torch.relu(x)", call)
        assert operator_signature(code) == frozenset({"conv2d", "relu"}), call


def test_duplicate_keys() -> None:
    reformatted = KB.replace("    return torch.relu(x)", "    return torch.relu( x )  # same")
    assert exact_key(reformatted) == exact_key(KB)
    assert exact_key(RENAMED) != exact_key(KB)
    renamed_only = KB.replace("self.conv", "self.c")
    assert near_key(renamed_only) == near_key(KB)
    assert near_key(RENAMED) != near_key(KB)  # batch_size differs: a different problem
