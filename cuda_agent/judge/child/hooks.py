"""Hooks through which a candidate's code would run later inside the judge's own, with no thread of its own.

The timed protocol makes each call's inputs after the call before has returned and flushes the cache before the
clock starts: work done there is outside the timed window. Red-team rounds 8 and 9 (2026-12-06) got code of their
own to run there through an allocator and through a thread kept alive; the allocator watch and the thread census
(guards.py) close those. The interpreter and torch have more such doors, each a registration that outlives the
call that made it: a trace or profile function (handed the judge's frames, inputs in their locals), a signal
handler with a timer to fire it, a garbage-collection callback, an import hook, a torch dispatch or function mode
left on its stack (it sees every operator the judge runs: the next inputs as they are drawn), dynamo's frame
evaluation callback, a `sys.monitoring` tool (Python 3.12). The static policy refuses their names; `HookWatch`
sees the registrations themselves, whatever spelling made them, by comparing them with what they were before
candidate code ran. It reads only: no allocation on a device, no call into the candidate's objects (identity, never
`==`).

`OperatorWatch` does the same for the dispatcher: a kernel of the candidate's registered for one of torch's own
operators (`torch.library`, `TORCH_LIBRARY_IMPL`, `_dispatch_library`) runs whenever the judge calls that operator.
Reading every operator's table costs ~50 ms on an idle core here and ~100 ms on the H100's busy host (about 2 s of
GPU slot per KernelBench L1/19 judgement when read at every check), so it is read whole at the import, init, the first
trial, the end of timing and the custom-work profile, and before the judge's own work after a candidate call (a
trial's comparison, a timed output's) only for the operators the judge's own work dispatches: those the profiler saw
the reference, the judge's work between the candidate's calls (input draws, copies, flush, sampling) and its earlier
comparisons call (`profiled_ops`). Work that calls an operator not yet known, or that the profiler saw nothing of (a
solution can turn torch's record-function callbacks off), is followed by a whole read before its result counts.

What this does not see: an audit hook (`sys.addaudithook`: Python offers no way to list them) and a signal sent by
another process to a native handler installed before our snapshot; the static policy refuses both means.
"""

from __future__ import annotations

import ctypes
import gc
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

_ITIMERS = (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF)
_SIGACTION_BYTES = 256
"""Room for glibc's `struct sigaction` (152 bytes on x86-64), whose first member is the handler's address."""


_LIBC = ctypes.CDLL(None)
"""The C library's functions, looked up once (the watch reads the handlers at every timed call)."""


def _native_handlers() -> tuple[int, ...]:
    """The address of each signal's handler as the kernel holds it (`sigaction`): one installed from C or through
    ctypes, which `signal.getsignal` does not show."""
    buffer = ctypes.create_string_buffer(_SIGACTION_BYTES)
    handlers = []
    for number in sorted(int(s) for s in signal.valid_signals()):
        if number >= signal.SIGRTMIN:  # glibc keeps the lowest real-time signals for its threads' own use
            break
        ok = _LIBC.sigaction(number, None, buffer) == 0
        handlers.append(int.from_bytes(buffer.raw[:8], sys.byteorder) if ok else -1)
    return tuple(handlers)


def _posix_timers() -> int:
    """How many POSIX timers (`timer_create`) the process holds; -1 where the kernel does not list them."""
    try:
        with open("/proc/self/timers") as listing:
            return sum(line.startswith("ID:") for line in listing)
    except OSError:
        return -1


def _monitoring_tools() -> tuple[Any, ...]:
    monitoring = getattr(sys, "monitoring", None)
    return tuple(monitoring.get_tool(i) for i in range(6)) if monitoring is not None else ()


class HookWatch:
    """What each hook held before candidate code ran (`before`); `installed()` names those that changed since."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.before = self.read()

    def read(self) -> dict[str, tuple[Any, ...]]:
        torch = self.torch
        eval_frame = getattr(getattr(torch._C, "_dynamo", None), "eval_frame", None)
        frame_callback = getattr(eval_frame, "get_eval_frame_callback", None)
        return {
            "sys.settrace": (sys.gettrace(),),
            "sys.setprofile": (sys.getprofile(),),
            "threading.settrace": (threading.gettrace(),),
            "threading.setprofile": (threading.getprofile(),),
            "gc.callbacks": tuple(gc.callbacks),
            "sys.meta_path": tuple(sys.meta_path),
            "sys.path_hooks": tuple(sys.path_hooks),
            "signal handlers": tuple(signal.getsignal(s) for s in sorted(signal.valid_signals())),
            "native signal handlers": _native_handlers(),
            "interval timers": tuple(signal.getitimer(t) != (0.0, 0.0) for t in _ITIMERS),
            "POSIX timers": (_posix_timers(),),
            "sys.monitoring tools": _monitoring_tools(),
            "torch dispatch modes": (torch._C._len_torch_dispatch_stack(),),
            "torch function modes": (torch._C._len_torch_function_stack(),),
            "dynamo frame evaluation": (frame_callback() if frame_callback is not None else None,),
        }

    def installed(self) -> list[str]:
        """The hooks that hold something other than before candidate code ran."""
        now = self.read()
        return [name for name, held in self.before.items() if not _same(held, now[name])]


def _same(before: tuple[Any, ...], now: tuple[Any, ...]) -> bool:
    """Element by element: the same object, or an equal number or flag (read by us: never the candidate's `==`)."""
    if len(before) != len(now):
        return False
    plain = (int, bool, float, str, type(None))
    return all(a is b or (type(a) in plain and type(a) is type(b) and a == b) for a, b in zip(before, now, strict=True))


_DISPATCH_KEYS = (
    "CPU:",
    "CUDA:",
    "BackendSelect:",
    "ADInplaceOrView:",
    "Autograd:",
    "AutogradCPU:",
    "AutogradCUDA:",
    "CompositeImplicitAutograd",
    "CompositeExplicitAutograd",
)
"""The dispatch keys an operator called on a CPU or CUDA tensor passes through (others, such as Meta, which torch's
own modules fill in as they are first imported, do not run on the judge's tensors)."""


class OperatorWatch:
    """The kernels registered for each of torch's operators, as before candidate code ran; `overridden()` names the
    operators whose kernels for the keys that run on the judge's tensors changed since (new operators are ignored:
    a library the candidate loads may define its own)."""

    def __init__(self, torch: Any, known: Iterable[str] = ()) -> None:
        self.torch = torch
        self.names = tuple(torch._C._dispatch_get_all_op_names())
        self.dumps = tuple(map(torch._C._dispatch_dump, self.names))
        self.before = tuple(map(_watched, self.dumps))
        self.known: frozenset[str] = frozenset()
        """Operators (`aten::add`, every overload) the judge's own work is known to dispatch: `overridden(known=True)`."""
        self.hot: tuple[int, ...] = ()
        self.reads = {"all": 0, "known": 0}
        """Reads of the tables so far, whole and of the known operators alone (the verdict's env `operator_reads`)."""
        self.watch(known)

    def watch(self, ops: Iterable[str]) -> bool:
        """Add operators (profiler names, `namespace::name`) to the known ones; whether any was new."""
        new = {op for op in ops if "::" in op} - self.known
        if not new:
            return False
        self.known |= new
        self.hot = tuple(i for i, name in enumerate(self.names) if name.split(".", 1)[0] in self.known)
        return True

    def overridden(self, known: bool = False) -> list[str]:
        """Operators whose watched kernels changed: every one, or (`known`) only the known ones' overloads."""
        # Most operators' dumps are unchanged to the byte: only those that differ are filtered to the watched keys
        # (a Meta kernel torch adds as a module is first imported changes a dump, not what runs on our tensors).
        dump = self.torch._C._dispatch_dump
        indices = self.hot if known else range(len(self.names))
        self.reads["known" if known else "all"] += 1
        changed = [i for i in indices if dump(self.names[i]) != self.dumps[i]]
        return [self.names[i] for i in changed if _watched(dump(self.names[i])) != self.before[i]]


def profiled_ops(torch: Any, work: Callable[[], Any]) -> tuple[Any, set[str] | None]:
    """`work()`'s result and the operators the profiler saw it dispatch on this thread, composite ones and those they
    call included; None where the profiler could not run (another session of it open: the candidate's, maybe)."""
    try:
        profiler = torch.autograd.profiler.profile(use_kineto=True)
        profiler.__enter__()
    except Exception:
        return work(), None
    try:
        result = work()
    finally:
        try:
            profiler.__exit__(None, None, None)
            # The raw events, not `function_events`: building those (a tree, times) cost ~150 ms a comparison at
            # KernelBench L1/19's size (hundreds of chunked operators), 2.8 s of an H100 judgement's 6.5.
            names = (event.name() for event in profiler.kineto_results.events())
            ops: set[str] | None = {name for name in names if "::" in name}
        except Exception:
            ops = None
    return result, ops


def _watched(dump: str) -> tuple[str, ...]:
    """An operator's registrations for the keys that run on the judge's tensors, from its `_dispatch_dump`."""
    return tuple(line for line in dump.splitlines() if line.startswith(_DISPATCH_KEYS))
