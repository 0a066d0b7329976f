"""The run stage's grader: taken ready, run in the judgement's GPU turn, watched per step (standby.py).

A part of pipeline.py's `_Judgement` kept in a module of its own (the pipeline's line budget): it reads and records
the judgement's state (`j.standby`, `j.stage_s`, `j.env`, `j.limits`) as a method would.

The grader ticks after each of its steps; the candidate's process, in the grader's process group, has no pipe to
us: a candidate call that hangs stops the ticks, and the step's limit kills both.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from cuda_agent.errors import JudgeInfraError
from cuda_agent.judge.standby import SPARE
from cuda_agent.subproc import ChildResult

if TYPE_CHECKING:
    from cuda_agent.judge.pipeline import _Judgement

STARTUP_S = 300.0
"""Longest the candidate's process may take to start (import torch, set up CUDA) before it is our failure."""


def run_watched(j: _Judgement, args: list[str], env: dict[str, str], workdir: Path) -> tuple[ChildResult, str]:
    """Run judgement `j`'s grader (its standby started ahead, else a new one) in its GPU turn, watched per step;
    (how it ended, what its limit was). The grader confines the candidate's process itself (its request says how)."""
    origin = j.standby_origin if j.standby is not None else "started for the run"
    standby = j.standby or j.start_standby()
    j.standby = None
    j.candidate_ran = False
    try:
        waited = time.monotonic()
        why_not = standby.wait_ready(STARTUP_S)
        if why_not and origin == SPARE:  # it died while it waited for us: not this run's fault
            j.env["standby_spare_discarded"], origin = why_not, "started for the run"
            standby = j.start_standby()
            why_not = standby.wait_ready(STARTUP_S)
        if why_not:
            raise JudgeInfraError(f"{why_not}; this is our failure, not the candidate's: retry the judgement")
        # Its set-up (from its start, maybe long before this judgement) and how long this judgement waited.
        j.stage_s["run.standby_ready"] = standby.ready_s or 0.0
        j.stage_s["run.standby_wait"] = time.monotonic() - waited
        j.stage_s["run.standby_turn_wait"] = standby.turn_wait_s
        j.env["standby_worker"] = origin
        limits = j.limits
        go_env = {k: env[k] for k in ("TORCH_EXTENSIONS_DIR", "HOME", "TMPDIR") if k in env}
        with j.gpu_turn("run"):
            standby.go(args, workdir, go_env, None)
            child, killed_by = standby.wait(limits.step_s, limits.total_s)
        # From the request handed over to the end: what the run's limits count (the stage also holds the
        # wait for the worker's start-up, which a busy machine stretches).
        j.stage_s["run.after_go"] = child.wall_s
        j.stage_s["run.last_step"] = standby.last_step_s
        if standby.build_grace_s:  # torch's loader compiled in the run past its limits (standby.BUILD_GRACE_S)
            j.stage_s["run.build_grace"] = standby.build_grace_s
            j.env["run_stage_built"] = (
                f"torch's extension build ran in the run stage, {standby.build_grace_s:.0f} s past its limits; "
                f"ninja's reason: {standby.build_why}"
            )
        j.candidate_ran = standby.candidate_started
    finally:
        standby.close()
    if killed_by == "step":
        return child, f"one step of it (a call, a comparison) took longer than {limits.step_s:.0f} s"
    return child, f"it took longer than {limits.total_s:.0f} s"
