"""Threat 20: predicting the judge's inputs. Every input is drawn in the grader's process from a 63-bit seed taken
from the OS's CSPRNG for that call alone; the candidate's process holds no seed, in its RNG state, its environment
or any file it can read."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.judge.protocol import RunRequest
from tests.judge.threats._hacks import TIMED, failed_check, judge_hack, model_new

# Draws what get_inputs() would draw, had torch's generator been seeded as the judge's draw left it, and returns its
# relu without reading x: right only where the inputs can be predicted from the process's own state.
PREDICT = (
    "g = torch.Generator().manual_seed(torch.initial_seed())\n"
    "guess = torch.randn(x.shape, generator=g)\n"
    "return ext.relu(guess.contiguous())"
)


def test_runtime_the_candidates_process_cannot_reproduce_its_inputs(tmp_path: Path) -> None:
    verdict = judge_hack(tmp_path, "examples/relu", model_new(PREDICT), static_policy=False, **TIMED)
    assert verdict.reward == -1 and verdict.verdict in ("incorrect", "rejected"), verdict.message


def test_no_seed_crosses_to_the_grader_in_its_request() -> None:
    assert not [name for name in RunRequest.model_fields if "seed" in name]


# A thread of its own watches the input buffer the last call came in; when it changes (the grader writing the next
# call's inputs, then flushing the cache for milliseconds before it asks), the thread notes it and computes the answer
# ahead. forward waits for that work where the thread had noticed its inputs before the call began; else it is
# honest under the ATen tracer (trials) and returns zeros: right on every timed call only where a call's inputs are
# readable before the call.
WATCH_AHEAD_INIT = """
import ctypes, threading, time
self.x, self.noticed, self.ahead = None, None, None
self.ext = ext


def watch():
    while True:
        time.sleep(0.0001)
        x = self.x
        if x is None or ctypes.string_at(x.data_ptr(), 64) == self.noticed:
            continue
        self.noticed = ctypes.string_at(x.data_ptr(), 64)
        time.sleep(0.001)  # the grader's copy of the rest
        snap = x.clone()
        self.ahead = (ctypes.string_at(snap.data_ptr(), 4 * snap.numel()), self.ext.relu(snap))


threading.Thread(target=watch, daemon=True).start()
"""
WATCH_AHEAD_FORWARD = """
import ctypes, time
from torch.utils._python_dispatch import _get_current_dispatch_mode
noticed = self.noticed == ctypes.string_at(x.data_ptr(), 64)
self.x = x
for _ in range(100 if noticed else 0):
    ahead = self.ahead
    if ahead is not None and ahead[0] == ctypes.string_at(x.data_ptr(), 4 * x.numel()):
        return ahead[1]
    time.sleep(0.0002)
if _get_current_dispatch_mode() is not None:
    return ext.relu(x)
return torch.zeros_like(x)
"""


@pytest.mark.slow
def test_runtime_no_thread_of_the_candidate_sees_a_calls_inputs_before_the_call(tmp_path: Path) -> None:
    # The cache flush before each timed call is milliseconds in which the grader's inputs wait for the call; a buffer
    # the candidate's process already maps must never hold them (on the CPU every call's inputs come in new ones).
    attack = model_new(WATCH_AHEAD_FORWARD, WATCH_AHEAD_INIT)
    verdict = judge_hack(tmp_path, "examples/relu", attack, static_policy=False, **TIMED)
    assert verdict.reward == -1 and verdict.verdict in ("incorrect", "rejected"), verdict.message
    assert failed_check(verdict)["label"] == "timed", verdict.message  # honest under the tracer: trials pass
