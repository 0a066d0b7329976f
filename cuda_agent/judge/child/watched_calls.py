"""Which of the candidate's calls the instruments in its process watch, as the grader places them (grader.py).

Two instruments run in the candidate's process around a call of forward, and report claims: the ATen tracer (torch
compute, refused under `cuda-agent`) and the kernelbench dataflow check (policy/runtime.torch_only_reason: whether the
candidate's kernels reach its outputs). Every trial runs under one of them. Beyond the trials, the grader watches
untimed calls of their own placed among the timed ones, on fresh inputs in the same buffers after the same cache flush:
one at a place drawn uniformly over the trials and the timed phase's first `warmup_reps + min_reps` calls (under
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
    from cuda_agent.judge.protocol import RunRequest


def window(req: RunRequest) -> int:
    """The calls the first watched call's place is drawn over: the trials and the timed phase's first calls."""
    return req.trials + (req.warmup_reps + req.min_reps if req.time else 0)


def place(req: RunRequest) -> int:
    """The first watched call: a trial's index below `req.trials`, else a timed call's index plus `trials`. Under
    `cuda-agent` the tracer watches every trial already: the first watched call of its own is among the timed ones."""
    if req.policy == "cuda-agent" and req.time:
        return req.trials + secrets.randbelow(req.warmup_reps + req.min_reps)
    return secrets.randbelow(window(req))


def watched(req: RunRequest, at: int, index: int) -> bool:
    """Whether an untimed watched call comes before timed call `index` (`at`: the first's place, `place`)."""
    if index < req.warmup_reps + req.min_reps:
        return at == req.trials + index
    return secrets.randbelow(window(req)) == 0


def call_if_watched(grader: Grader, index: int) -> bool:
    """A watched call of its own before timed call `index` where that is one's place; whether there was one."""
    from cuda_agent.judge.child.grader import fresh_seed
    from cuda_agent.judge.child.inputs import make_inputs

    req = grader.req
    if not watched(req, grader.watch_at, index):
        return False
    inputs = make_inputs(grader.problem, req.task_name, fresh_seed(), grader.device)
    refs, _ = grader.exchange.load(inputs)
    del inputs
    grader.flush()
    kernelbench = req.policy == "kernelbench"
    grader.call(refs, "timing", trace=not kernelbench, dataflow=kernelbench)
    return True
