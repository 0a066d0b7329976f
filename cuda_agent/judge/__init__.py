"""The judge: decides whether a candidate is correct and how fast it is, and cannot be fooled.

Use `judge(task, solution, JudgeConfig())`; see `pipeline.py` for the stages. This module is the judge's
only door for other packages (an import-linter contract in pyproject.toml holds them to it); its modules
are the judge's own business. The names are resolved lazily, so that a process that needs one of them
(the judge's children, synth's filter workers) imports only the module that defines it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cuda_agent.judge.baseline_stage import baseline_key, baseline_key_env
    from cuda_agent.judge.build import trim_compile_log
    from cuda_agent.judge.child.timing import Clock, make_flusher, rotate, time_phase
    from cuda_agent.judge.config import JudgeConfig
    from cuda_agent.judge.env import PROTOCOL_VERSION, apply_precision_flags, describe_device
    from cuda_agent.judge.kernel_build import compile_workspace
    from cuda_agent.judge.pipeline import judge, prepare, reference_timings, start_spare
    from cuda_agent.judge.policy import KERNELBENCH_DIFFERENCES, KERNELBENCH_RELAXED
    from cuda_agent.judge.protocol import BaselineResult
    from cuda_agent.judge.solution import detect_language
    from cuda_agent.judge.standby import Standby
    from cuda_agent.judge.triton_build import TritonBuildResult, compile_triton

_HOMES = {
    "JudgeConfig": "config",
    "judge": "pipeline",
    "prepare": "pipeline",
    "reference_timings": "pipeline",
    "start_spare": "pipeline",
    "Standby": "standby",
    "baseline_key": "baseline_stage",
    "baseline_key_env": "baseline_stage",
    "BaselineResult": "protocol",
    "detect_language": "solution",
    "trim_compile_log": "build",
    "compile_triton": "triton_build",
    "compile_workspace": "kernel_build",
    "TritonBuildResult": "triton_build",
    "PROTOCOL_VERSION": "env",
    "apply_precision_flags": "env",
    "describe_device": "env",
    "Clock": "child.timing",
    "make_flusher": "child.timing",
    "time_phase": "child.timing",
    "rotate": "child.timing",
    "KERNELBENCH_DIFFERENCES": "policy",
    "KERNELBENCH_RELAXED": "policy",
}
"""Each exported name and the module (of this package) that defines it."""

__all__ = [
    "KERNELBENCH_DIFFERENCES",
    "KERNELBENCH_RELAXED",
    "PROTOCOL_VERSION",
    "BaselineResult",
    "Clock",
    "JudgeConfig",
    "Standby",
    "TritonBuildResult",
    "apply_precision_flags",
    "baseline_key",
    "baseline_key_env",
    "compile_triton",
    "compile_workspace",
    "describe_device",
    "detect_language",
    "judge",
    "make_flusher",
    "prepare",
    "reference_timings",
    "rotate",
    "start_spare",
    "time_phase",
    "trim_compile_log",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'cuda_agent.judge' has no attribute {name!r}")
    return getattr(importlib.import_module(f"cuda_agent.judge.{_HOMES[name]}"), name)
