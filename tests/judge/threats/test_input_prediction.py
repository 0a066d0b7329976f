"""Threat 20: predicting the judge's inputs. Every input is drawn in the grader's process from a 63-bit seed taken
from the OS's CSPRNG for that call alone; the candidate's process holds no seed, in its RNG state, its environment
or any file it can read."""

from __future__ import annotations

from pathlib import Path

from cuda_agent.judge.protocol import RunRequest
from tests.judge.threats._hacks import TIMED, judge_hack, model_new

# Draws what get_inputs() would draw, had torch's generator been seeded as the judge's draw left it, and returns its
# relu without reading x: right only where the inputs can be predicted from the process's own state.
PREDICT = (
    "g = torch.Generator().manual_seed(torch.initial_seed())\n"
    "guess = torch.randn(x.shape, generator=g)\n"
    "return ext.relu(guess.contiguous())"
)


def test_runtime_the_candidates_process_cannot_reproduce_its_inputs(tmp_path: Path) -> None:
    verdict = judge_hack(tmp_path, "examples/relu", model_new(PREDICT), static_policy=False, **TIMED)
    assert verdict.reward == -1 and verdict.verdict in ("incorrect", "rejected"), verdict.message


def test_no_seed_crosses_to_the_grader_in_its_request() -> None:
    assert not [name for name in RunRequest.model_fields if "seed" in name]
