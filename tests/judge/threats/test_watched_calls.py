"""Threat 25: telling the calls the instruments in the candidate's process watch from the others (the ATen tracer,
the kernelbench dataflow check), and running the kernels on those alone.

The dataflow check (policy/runtime.torch_only_reason) once had a message of its own after the timed phase, on
inputs in a buffer no call had had: a solution ran torch alone on every call but the one on a new input address
(round 11's r07, passed at reward 1, 3 through `serve`), or the one after the profile's repeated inputs (round 12's
t11). The tracer watched the trials and a recheck after the timed phase, which a solution could guess by place and
pause (round 12's t02, passed under `cuda-agent` with the static policy off). Watched calls are now placed at random
among the trials and the timed calls, on the same buffers as theirs (child/watched_calls.py): such a solution is
seen but for the chance that every watched call lands among those it picked. What still tells a watched call apart,
its instruments, is open (DESIGN.md).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from cuda_agent.judge.child import watched_calls
from tests.judge.helpers import example_solution, replace_model_new, run_judge
from tests.judge.threats import _static
from tests.judge.threats._hacks import TIMED, judge_hack, model_new

# Its kernel where the check's call once stood out, torch on every other call: on an input address no earlier call
# had (r07), or on the first call after a run of repeated inputs (the profile's calls; t11).
WHERE_IT_STOOD_OUT = """
new = x.data_ptr() not in self.seen
self.seen.add(x.data_ptr())
head = float(x.reshape(-1)[0])
after_repeats = self.repeats >= 2 and head != self.last
self.repeats = self.repeats + 1 if head == self.last else 0
self.last = head
return ext.relu(x.contiguous()) if (new and len(self.seen) > 1) or after_repeats else torch.relu(x)
"""
STATE = "self.seen, self.last, self.repeats = set(), None, 0"
SHORT_PHASE = {**TIMED, "min_reps": 10, "max_reps": 10, "paired_eager": ()}
"""The timed phase's calls the check's place ranges over, and no more."""


def test_a_watched_call_may_be_any_trial_or_timed_call() -> None:
    kb = SimpleNamespace(policy="kernelbench", trials=5, time=True, warmup_reps=3, min_reps=4)  # a RunRequest's fields
    timed = {5 + 3 + i for i in range(4)}  # the timed phase's first timed calls, after its warm-ups
    assert {watched_calls.place(kb, 1) for _ in range(600)} == set(range(5)) | timed
    untimed = SimpleNamespace(**{**vars(kb), "time": False})
    assert {watched_calls.place(untimed, 1) for _ in range(300)} == set(range(5))
    cuda_agent = SimpleNamespace(**{**vars(kb), "policy": "cuda-agent"})  # its tracer watches every trial already
    assert {watched_calls.place(cuda_agent, 1) for _ in range(300)} == timed
    assert watched_calls.place(SimpleNamespace(**{**vars(cuda_agent), "time": False}), 1) == -1
    # In the first window, the one placed; after it, any timed call with the chance of one place in the window.
    assert [i for i in range(7) if watched_calls.watched(kb, 1, 5 + 3 + 2, i)] == [3 + 2]
    late = sum(watched_calls.watched(kb, 1, 0, 7 + i % 100) for i in range(9_000))
    assert 700 < late < 1300  # 1 in 9
    # In requests of 4 calls: 2 trial requests, 1 warm-up request, the timed phase's fewest (6: timing.MIN_GROUPS).
    grouped = SimpleNamespace(**{**vars(kb), "min_reps": 16})
    assert {watched_calls.place(grouped, 4) for _ in range(600)} == {0, 1} | {2 + 1 + i for i in range(6)}
    assert [i for i in range(1 + 6) if watched_calls.watched(grouped, 4, 2 + 1 + 3, i)] == [1 + 3]


@pytest.mark.slow
def test_runtime_kernels_where_the_check_stood_out_alone_are_refused(tmp_path: Path) -> None:
    verdict = judge_hack(
        tmp_path, "examples/relu", model_new(WHERE_IT_STOOD_OUT, STATE), static_policy=False, **SHORT_PHASE
    )
    assert verdict.reward == -1 and verdict.verdict == "rejected", verdict.message
    expected = {"cuda-agent": "torch_compute_at_runtime", "kernelbench": "no_custom_kernel"}[_static.POLICY]
    assert expected in {v.check for v in verdict.violations}, verdict.message


@pytest.mark.gpu
def test_gpu_kernels_where_the_check_stood_out_alone_are_refused(tmp_path: Path) -> None:
    # On CUDA every call's inputs are in the same buffers: the check's call once came in buffers of its own.
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    body = WHERE_IT_STOOD_OUT.replace("ext.relu(", "relu_ext.relu_forward(")
    source = replace_model_new(example_solution("relu", "cuda"), model_new(body, STATE))
    verdict = run_judge(tmp_path, "examples/relu", source, "cuda", static_policy=False, policy=_static.POLICY, **TIMED)
    assert verdict.reward == -1 and verdict.verdict == "rejected", verdict.message
