"""Threat 21: rewriting the build other candidates load.

Candidates whose files differ only in ModelNew share one build (`SolutionSource.build_hash` leaves ModelNew out), yet
ModelNew's class body, bases and decorators run at import. In the build stage they ran beside the build, and what
that child left in its build folder the judge keeps for every candidate of the key: here a class body (no string
constant in ModelNew, which would count in the key) truncates the built library, and an honest candidate of the same
key, judged next, loaded 64 bytes. The build stage now imports the file without ModelNew
(`SolutionSource.build_python`); ModelNew runs only in the candidate's process, on its private copy of the build.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cuda_agent.judge import JudgeConfig, judge
from cuda_agent.judge.confine import mounts_work
from cuda_agent.judge.solution import SolutionSource
from cuda_agent.tasks import Catalog
from cuda_agent.types import Verdict
from tests.judge import helpers

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.geteuid() != 0 or not mounts_work(),
        reason="needs root and namespaces: unconfined, the candidate's process writes the shared build as the judge",
    ),
]

POISON = """
class ModelNew(nn.Module):
    import glob as _glob, os as _os

    _folder = _os.environ[bytes([84, 79, 82, 67, 72, 95, 69, 88, 84, 69, 78, 83, 73, 79, 78, 83, 95, 68, 73, 82]).decode()]
    for _so in _glob.glob(_os.path.join(_folder, chr(42), chr(42) + chr(46) + chr(115) + chr(111))):
        with open(_so, chr(114) + chr(43) + chr(98)) as _f:
            _f.truncate(64)

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_forward(x.contiguous())
"""


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Verdict, list[Path]]:
    """The poisoner judged first (static policy off, as native code would get past it), then the honest example with
    the same build key, in a cache of their own: one build for both policies' runs."""
    cache = tmp_path_factory.mktemp("shared-build") / "cache"
    task = Catalog().resolve("examples/relu")
    honest = helpers.example_solution("relu")
    poisoner = helpers.replace_model_new(honest, POISON)
    assert SolutionSource(python=poisoner).build_hash == SolutionSource(python=honest).build_hash
    config = JudgeConfig(device="cpu", time=False, verdict_cache=False, cache_dir=cache)
    judge(task, SolutionSource(python=poisoner), config.model_copy(update={"static_policy": False}))
    verdict = judge(task, SolutionSource(python=honest), config)
    return verdict, sorted(cache.rglob("*.so"))


def test_a_candidate_cannot_rewrite_the_build_that_others_of_its_key_load(judged: tuple[Verdict, list[Path]]) -> None:
    verdict, libraries = judged
    assert verdict.verdict == "pass", verdict.message
    assert libraries and all(so.stat().st_size > 4096 and so.read_bytes()[:4] == b"\x7fELF" for so in libraries)
