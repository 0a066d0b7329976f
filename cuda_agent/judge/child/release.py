"""A request's calls released one at a time on the CPU, through a control block both processes map.

Were a request's K inputs all in the candidate's process at its start, its first call could compute every call's
output in one batch, which the baselines' calls cannot (a gain of K - 1 launches on a tiny task, the outputs all
correct). So only the first call's inputs are in their buffer when the request starts; the later calls' buffers come
with it, mapped and empty. After each call of forward but the last, the shim writes where that call's outputs lie
into the control block (a shared memfd, mapped once) and raises its count (`RETURNED`); the grader, waiting on that
count, reads a sample of those outputs where they lie (outputs.Outputs.mark, without stopping the candidate's
processes), writes the next call's inputs into their buffers and raises its own count (`RELEASED`), which the shim
waits on. At the request's end the grader stops every process of the candidate's and reads every call's outputs as
before, each released call's from the place it gave as it returned: one whose sample changed since was written after
its call returned, and is incorrect. No message, no buffer mapped and no Python of the shim's but a few lines run
between two calls of forward: a wait is a spin, then a futex (`Control.wait`). The baselines, eager now and the gauge
run through the same shim loop and pay the same exchange.

What it does not protect against: the candidate's process maps the block and may write both counts and the places.
Raising `RETURNED` early gets the next inputs early only after the grader read the call before's outputs as they
were then (unfinished: its outputs change after, incorrect); raising `RELEASED` makes its own loop go on before its
inputs are there (wrong outputs). Neither moves the grader's own count, which it keeps in its memory. Work a thread
does between the calls, before the grader's read, is inside the outside view, which the calibration's zero model pays
alike; an output left unfinished in a share of its elements too small for the sample to meet (`RELEASE_SAMPLES`) is
not seen. Stores are plain: x86-64 keeps them in order, as the two loops need (the inputs written before the count
is seen raised); another architecture would need fences (a small C helper), not built.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import platform
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cuda_agent.judge.protocol import OutputShape, Release

if TYPE_CHECKING:
    from cuda_agent.judge.child.grader import Grader
    from cuda_agent.judge.child.outputs import Released

RETURNED, RELEASED, GRADER_ASLEEP, SHIM_ASLEEP = 0, 16, 32, 48
"""The control block's 32-bit words, a cache line apart: the shim's count of calls returned, the grader's of calls
released, and whether each side sleeps on the other's count (the other then wakes it)."""
PLACES_BYTE = 256
"""Where the places of the last returned call's outputs begin: per output its address, then its strides (int64)."""
SHIM_SPIN_S = 0.005
"""How long the shim spins on the grader's count before it sleeps: the grader's copy between two calls takes tens of
microseconds, and a wake from sleep costs as much again (more in a VM)."""
GRADER_SPIN_S = 0.0
"""How long the grader spins on the shim's count before it sleeps: not at all. On 2 cores shared with other work, a
spinning grader took the core that work then took from the candidate's process, and a spinner preempted by it hands
over late (on the loaded 2-core VM, 2,000 round trips of a 0.05 ms relu: a spinning grader's exchange 0.005 ms at
the median but 1.2 to 5 ms at the 99th percentile; a sleeping one's 0.025 and 0.06 ms)."""
SLEEP_S = 0.001
"""A sleep's longest wait before it looks again (a wake lost between the count and the sleep's flag costs this)."""
_FUTEX_WAIT, _FUTEX_WAKE = 0, 1
_SYS_FUTEX = {"x86_64": 202, "aarch64": 98}


def block_bytes(outputs: list[OutputShape]) -> int:
    """The control block's size for a call's `outputs`: the counts, then each output's address and strides."""
    return PLACES_BYTE + 8 * sum(1 + len(o.shape) for o in outputs)


class _Timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]


@functools.cache
def _syscall() -> Callable[..., int]:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc.syscall


class Control:
    """One side's view of the control block (`region`, a shared mapping of at least `block_bytes`)."""

    def __init__(self, region: mmap.mmap) -> None:
        self.words = memoryview(region).cast("i")
        self.wide = memoryview(region).cast("q")
        self.base = ctypes.addressof(ctypes.c_char.from_buffer(region))
        self.futex = _SYS_FUTEX.get(platform.machine())
        self.timeout = _Timespec(0, int(SLEEP_S * 1e9))

    def call_returned(self, outputs: list[object], count: int) -> None:
        """In the shim, after a call of forward: say where its outputs lie and that it returned (`count`), and wait
        until the grader has released the next call (its count reaches `count` too)."""
        self.put_places(outputs)
        self.bump(RETURNED, count, GRADER_ASLEEP)
        self.wait(RELEASED, count, SHIM_SPIN_S, SHIM_ASLEEP, None)

    def returned(self, count: int, give_up: Callable[[], bool]) -> bool:
        """In the grader: wait until the shim's count reaches `count` (a call returned); False where `give_up` said
        so first (the candidate's process answered instead)."""
        return self.wait(RETURNED, count, GRADER_SPIN_S, GRADER_ASLEEP, give_up)

    def release(self, count: int) -> None:
        """In the grader, the next call's inputs written: raise our count to `count`."""
        self.bump(RELEASED, count, SHIM_ASLEEP)

    def bump(self, word: int, value: int, asleep: int) -> None:
        """Set the count `word` to `value`, and wake the other side where it sleeps on it (`asleep` set)."""
        self.words[word] = value
        if self.words[asleep] and self.futex is not None:
            _syscall()(self.futex, ctypes.c_void_p(self.base + 4 * word), _FUTEX_WAKE, 1, None, None, 0)

    def wait(self, word: int, target: int, spin_s: float, asleep: int, give_up: Callable[[], bool] | None) -> bool:
        """Wait until the count `word` reaches `target`: spinning for `spin_s`, then asleep on it (a futex; `asleep`
        set so that the other side wakes us), looking at `give_up` after each sleep. False where it gave up."""
        words = self.words
        end = time.perf_counter() + spin_s
        while words[word] < target:
            if time.perf_counter() > end:
                return self._sleep(word, target, asleep, give_up)
        return True

    def _sleep(self, word: int, target: int, asleep: int, give_up: Callable[[], bool] | None) -> bool:
        words = self.words
        try:
            while (seen := words[word]) < target:
                words[asleep] = 1
                if self.futex is None:
                    time.sleep(SLEEP_S)
                else:  # returns at once where the count moved since `seen`: no wake is lost but in the race above
                    address = ctypes.c_void_p(self.base + 4 * word)
                    _syscall()(self.futex, address, _FUTEX_WAIT, seen, ctypes.byref(self.timeout), None, 0)
                if words[word] < target and give_up is not None and give_up():
                    return False
            return True
        finally:
            words[asleep] = 0

    def put_places(self, values: list[object]) -> None:
        """In the shim: where each of a call's outputs (plain tensors) lies, for the grader's copy."""
        wide, at = self.wide, PLACES_BYTE // 8
        for value in values:
            wide[at] = value.data_ptr()  # type: ignore[attr-defined]
            for stride in value.stride():  # type: ignore[attr-defined]
                at += 1
                wide[at] = stride
            at += 1

    def places(self, outputs: list[OutputShape]) -> list[tuple[int, tuple[int, ...]]]:
        """In the grader: the places the shim wrote for a call's `outputs` (a claim: read within bounds, outputs.py)."""
        wide, at, found = self.wide, PLACES_BYTE // 8, []
        for output in outputs:
            rank = len(output.shape)
            found.append((wide[at], tuple(wide[at + 1 : at + 1 + rank])))
            at += 1 + rank
        return found

    def close(self) -> None:
        self.words.release()
        self.wide.release()


class Releases:
    """The grader's side: the later calls' inputs of the request loaded last, held until each is released, the
    control block, and our count of calls released (the run's; the candidate's process cannot move it)."""

    def __init__(self) -> None:
        self.held: list[list[tuple[Any, Any]]] = []
        """Per later call, (our view of an input buffer, the values to write there) for each tensor input."""
        self.control: tuple[int, Control] | None = None
        """The control block's buffer and our view of it, made at the first request that releases."""
        self.count = 0

    def hold(self, torch: Any, views: list[list[Any]], calls: list[list[Any]]) -> None:
        """Hold each later call's inputs (`calls[1:]`), to be written into their buffers (`views[1:]`) at release;
        `calls` empty: none held (the request's inputs are all in their buffers)."""
        self.held = (
            [
                [(view, value) for view, value in zip(ours, inputs, strict=True) if isinstance(value, torch.Tensor)]
                for ours, inputs in zip(views[1:], calls[1:], strict=True)
            ]
            if calls
            else []
        )

    def question(self, g: Grader, shapes: list[OutputShape]) -> Release | None:
        """The release of the request loaded last (None: nothing held); the control block made and sent at the
        first, as any buffer is."""
        if not self.held:
            return None
        if self.control is None:
            ref, _ = g.exchange.ref("control", (block_bytes(shapes),), g.torch.uint8)
            self.control = (ref.buffer, Control(g.exchange.buffers["control"][1].region))
        return Release(control=self.control[0], first=self.count)

    def run(self, g: Grader, release: Release, shapes: list[OutputShape], stage: str) -> list[Released]:
        """Release each later call's inputs once the call before has returned: read a sample of that call's outputs
        where it says they lie (its processes run on; the request's final read must find the same there:
        outputs.Outputs.mark), write the next call's inputs into their buffers, raise our count. What was read, per
        call released; fewer where the candidate's process answered first (`Channel.readable`: its answer says why).
        """
        from cuda_agent.judge.child.grader import fresh_seed

        _, control = self.control
        marked, held, self.held = [], self.held, []
        draw = g.torch.Generator().manual_seed(fresh_seed())
        g.copies.new_request()
        for k, copies in enumerate(held, start=1):
            if not control.returned(release.first + k, g.channel.readable):
                break
            marked.append(g.copies.mark(g.channel.sender, control.places(shapes), shapes, stage, draw))
            for view, value in copies:
                view.copy_(value)
            self.count = release.first + k
            control.release(self.count)
        return marked

    def close(self) -> None:
        if self.control is not None:
            self.control[1].close()
            self.control = None
