"""Round 9's files judged again on the tree that closes them, both policies, static policy on and off.

  . .venv/bin/activate && python bench/results/cpu-2026-12-06-redteam-9/rejudge.py > bench/results/cpu-2026-12-06-redteam-9/rejudge.txt
Correctness only with the static policy on (it refuses before anything runs); timed with it off.
"""

from __future__ import annotations

import sys
from pathlib import Path

from cuda_agent.judge import JudgeConfig, judge
from cuda_agent.judge.solution import SolutionSource
from cuda_agent.tasks import Catalog

HERE = Path(__file__).resolve().parent


def main() -> None:
    print("file | policy | static | verdict | reward | checks | message")
    for path in sorted(HERE.glob("g*.py")):
        task = Catalog().resolve("examples/linear_gelu" if "linear_gelu" in path.name else "examples/softmax")
        source = SolutionSource(python=path.read_text())
        for policy in ("cuda-agent", "kernelbench"):
            for static in (True, False):
                config = JudgeConfig(device="cpu", policy=policy, static_policy=static, time=not static)
                v = judge(task, source, config)
                checks = ",".join(sorted({x.check for x in v.violations})) or "-"
                print(
                    f"{path.name} | {policy} | {'on' if static else 'off'} | {v.verdict} | {v.reward} | {checks} | "
                    f"{v.message[:110]}",
                    flush=True,
                )


if __name__ == "__main__":
    sys.exit(main())
