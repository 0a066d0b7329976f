"""The judge: decides whether a candidate is correct and how fast it is, and cannot be fooled.

Use `judge(task, solution, JudgeConfig())`; see `pipeline.py` for the stages. The names are
resolved lazily so that the judge's child processes (`python -m cuda_agent.judge.worker`, ...)
import only what they run.
"""

from typing import Any

__all__ = ["JudgeConfig", "judge"]


def __getattr__(name: str) -> Any:
    if name == "JudgeConfig":
        from cuda_agent.judge.config import JudgeConfig

        return JudgeConfig
    if name == "judge":
        from cuda_agent.judge.pipeline import judge

        return judge
    raise AttributeError(name)
