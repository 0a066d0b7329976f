"""Where the kernelbench dataflow check watches the candidate's calls, as the grader places it (grader.py).

The check (policy/runtime.torch_only_reason: whether the candidate's kernels reach its outputs) runs in the
candidate's process around one call of forward. That call is placed uniformly over the trials and the timed phase's
first `warmup_reps + min_reps` calls, drawn in the grader before the first trial: as a trial (its inputs, buffers
and judgement a trial's, the check in place of the tracer) or as a call of its own before a timed call (fresh
inputs in the same buffers, the same cache flush, untimed). A solution that runs its kernels on some calls only
(the first ones, those after a pause, those on a buffer no call had) is seen with the chance of their share. Once
a check of its own after the timed phase, on inputs in a buffer of their own, its call was told apart by its place
and its address. What still tells it apart: the check's own instruments (a dispatch mode and a profiler of every
thread), which the candidate's process can see, as it sees the tracer on trials (DESIGN.md).
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cuda_agent.judge.child.grader import Grader
    from cuda_agent.judge.protocol import RunRequest


def place(req: RunRequest) -> int:
    """The index of the call the check watches: a trial's below `req.trials`, else the timed call's plus `trials`;
    -1 (none) but under kernelbench."""
    if req.policy != "kernelbench":
        return -1
    return secrets.randbelow(req.trials + (req.warmup_reps + req.min_reps if req.time else 0))


def call_if_placed(grader: Grader, index: int) -> bool:
    """The check's own call, if its place is before timed call `index`; whether it was."""
    from cuda_agent.judge.child.grader import fresh_seed
    from cuda_agent.judge.child.inputs import make_inputs

    if grader.flow_at != grader.req.trials + index:
        return False
    inputs = make_inputs(grader.problem, grader.req.task_name, fresh_seed(), grader.device)
    refs, _ = grader.exchange.load(inputs)
    del inputs
    grader.flush()
    grader.call(refs, "timing", dataflow=True)
    return True
