"""Helpers for judge tests: bundled tasks and solution variants that share one build.

Variants of a bundled solution that change only `class ModelNew` share the solution's build
(the build cache is keyed by everything but ModelNew), so each test pays for at most one compile.
"""

from __future__ import annotations

import re
from pathlib import Path

from cuda_agent.judge import JudgeConfig, judge
from cuda_agent.tasks import Catalog
from cuda_agent.types import Verdict

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "cuda_agent" / "tasks" / "examples"


def hungry_reference(where: str = "init") -> str:
    """The relu task, with a reference that asks for more memory than any machine has, in `where`.

    'init': the reference is built before the candidate's code loads, so the allocation that fails there is the
    judge's own out-of-memory (as the float64 comparison's 12 GiB was on a shared H200). 'forward': the reference
    runs inside the judge's comparison after the candidate's call, in the process its code shares; hungry from its
    second call on (the first is the judge's run of it before any candidate code, `Grader.warm_reference`).
    """
    line = {"init": "super().__init__()", "forward": "return torch.relu(x)"}[where]
    hungry = f"torch.empty(1 << 60, dtype=torch.uint8)\n        {line}"
    if where == "forward":
        hungry = (
            "self.calls = getattr(self, 'calls', 0) + 1\n        if self.calls > 1:\n"
            f"            torch.empty(1 << 60, dtype=torch.uint8)\n        {line}"
        )
    return (EXAMPLES / "problems" / "relu.py").read_text().replace(line, hungry)


def example_solution(name: str, device: str = "cpu") -> str:
    return (EXAMPLES / "solutions" / device / f"{name}.py").read_text()


def replace_model_new(source: str, new_class: str) -> str:
    """The solution with its `class ModelNew` (to the end of the file) replaced by `new_class`."""
    start = source.index("class ModelNew")
    return source[:start] + new_class.strip() + "\n"


def with_forward_body(source: str, body: str) -> str:
    """The solution with ModelNew.forward's body replaced (body indented by 8 spaces)."""
    match = re.search(r"(    def forward\(self[^)]*\)[^:]*:\n)((?:        .*\n?|\n)+)", source)
    assert match, "no forward found"
    indented = "".join(f"        {line}\n" if line else "\n" for line in body.strip("\n").splitlines())
    return source[: match.start(2)] + indented + source[match.end(2) :]


def run_judge(tmp_path: Path, task_ref: str, source: str, device: str = "cpu", **config) -> Verdict:
    path = tmp_path / "solution.py"
    path.write_text(source)
    task = Catalog().resolve(task_ref)
    config.setdefault("time", False)
    config.setdefault("verdict_cache", False)  # each test judges afresh; the cache has tests of its own
    return judge(task, path, JudgeConfig(device=device, **config))
