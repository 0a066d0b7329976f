"""Which of the candidate's calls the instruments in its process watch, as the grader places them (grader.py).

Two instruments run in the candidate's process around a call of forward, and report claims: the ATen tracer (torch
compute, refused under `cuda-agent`) and the kernelbench dataflow check (policy/runtime.torch_only_reason: whether the
candidate's kernels reach its outputs). Every trial runs under one of them. Beyond the trials, the grader watches
untimed calls of their own placed among the timed ones, trials on fresh inputs in the same buffers after the same cache
flush: one at a place drawn uniformly over the trials and the timed phase's first `min_reps` timed calls (under
kernelbench the dataflow check's one call, a trial's where it lands on a trial; under cuda-agent, whose tracer watches
every trial, over the timed ones), and then before each later timed call with the chance of one place in that window. A
solution that runs its kernels on some calls only (the first ones, those after a pause or on a buffer no call had) is
seen with the chance of their share, wherever they are. A check with a call of its own after the timed phase, or in
buffers of its own, would be told apart by its place or its address (bench/results/cpu-2026-12-07-redteam-12/). What
still tells a watched call apart is the instruments themselves (a dispatch mode, a profiler of every thread), which the
candidate's process can see (DESIGN.md).
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cuda_agent.judge.child.grader import Grader
    from cuda_agent.judge.protocol import DataflowCheck, RunRequest


def dataflow_check(req: RunRequest) -> DataflowCheck:
    """What the candidate's process needs to run the dataflow check: the correctness check's tolerances."""
    from cuda_agent.judge.protocol import DataflowCheck

    return DataflowCheck(atol=req.atol, rtol=req.rtol, norm_rtol=req.norm_rtol)


def window(req: RunRequest) -> int:
    """The calls the first watched call's place is drawn over: the trials where one instrument watches a single trial
    (kernelbench), and the timed phase's first `min_reps` timed calls (warm-ups are neither timed nor judged)."""
    return (req.trials if req.policy == "kernelbench" else 0) + (req.min_reps if req.time else 0)


def place(req: RunRequest) -> int:
    """The first watched call: a trial's index below `req.trials`, else a timed-phase call's index plus `trials`;
    -1 where there is none to place (untimed under cuda-agent, whose tracer watches every trial)."""
    slots = window(req)
    if slots == 0:
        return -1
    drawn = secrets.randbelow(slots)
    trials = req.trials if req.policy == "kernelbench" else 0
    return drawn if drawn < trials else req.trials + req.warmup_reps + drawn - trials


def watched(req: RunRequest, at: int, index: int) -> bool:
    """Whether a watched call comes before timed-phase call `index` (`at`: the first's place, `place`)."""
    if index < req.warmup_reps + req.min_reps:
        return at == req.trials + index
    return secrets.randbelow(window(req)) == 0


def call_if_watched(grader: Grader, index: int) -> bool:
    """A watched call before timed-phase call `index` where that is one's place, judged as a trial is (untimed);
    whether there was one."""
    if not watched(grader.req, grader.watch_at, index):
        return False
    grader.run_trial("identity", "watched", dataflow=grader.req.policy == "kernelbench", flush=True)
    return True
