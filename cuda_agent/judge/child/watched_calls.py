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
buffers of its own, would be told apart by its place or its address. What
still tells a watched call apart is the instruments themselves (a dispatch mode, a profiler of every thread), which the
candidate's process can see (DESIGN.md).
"""

from __future__ import annotations

import math
import secrets
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cuda_agent.judge.child.grader import Grader
    from cuda_agent.judge.protocol import DataflowCheck, RunRequest


def dataflow_check(req: RunRequest) -> DataflowCheck:
    """What the candidate's process needs to run the dataflow check: the correctness check's tolerances."""
    from cuda_agent.judge.protocol import DataflowCheck

    return DataflowCheck(atol=req.atol, rtol=req.rtol, norm_rtol=req.norm_rtol)


def _requests(req: RunRequest, group: int) -> tuple[int, int, int, int]:
    """In requests of `group` calls: the trials', those of them the first watched request's place is drawn over
    (kernelbench's, whose one instrument watches a single trial request; none under cuda-agent, whose tracer watches
    every trial), the timed phase's warm-ups, and its fewest timed ones (`timing.group_reps`)."""
    from cuda_agent.judge.child.timing import group_reps

    trials = math.ceil(req.trials / group)
    watched_trials = trials if req.policy == "kernelbench" else 0
    return (
        trials,
        watched_trials,
        math.ceil(req.warmup_reps / group),
        group_reps(req.min_reps, group) if req.time else 0,
    )


def window(req: RunRequest, group: int) -> int:
    """The requests the first watched request's place is drawn over: the trial requests where one instrument watches
    a single one (kernelbench), and the timed phase's fewest timed requests (warm-ups are neither timed nor judged)."""
    _, watched_trials, _, least = _requests(req, group)
    return watched_trials + least


def place(req: RunRequest, group: int) -> int:
    """The first watched request: a trial request's index below the trials' requests, else a timed-phase request's
    index plus theirs; -1 where there is none to place (untimed under cuda-agent, whose tracer watches every trial)."""
    trials, watched_trials, warmup, least = _requests(req, group)
    if watched_trials + least == 0:
        return -1
    drawn = secrets.randbelow(watched_trials + least)
    return drawn if drawn < watched_trials else trials + warmup + drawn - watched_trials


def watched(req: RunRequest, group: int, at: int, index: int) -> bool:
    """Whether a watched request comes before timed-phase request `index` (`at`: the first's place, `place`)."""
    trials, _, warmup, least = _requests(req, group)
    if index < warmup + least:
        return at == trials + index
    return secrets.randbelow(window(req, group)) == 0


def call_if_watched(grader: Grader, index: int) -> bool:
    """A watched request before timed-phase request `index` where that is one's place, its trial judged as a trial
    is (untimed); whether there was one."""
    if not watched(grader.req, grader.group, grader.watch_at, index):
        return False
    grader.run_trials([("identity", "watched")], dataflow=grader.req.policy == "kernelbench", flush=True)
    return True
