"""Runtime defences that live inside the candidate's process.

- `capture_integrity()` records the identity of every function the harness relies on (timer,
  synchronisation, comparison, serialisation), and of every callable in the namespaces the
  reference and the judge's own in-process code look names up in (torch's, torch.nn's classes,
  the judge's child modules), before candidate code is imported; `changed_functions()` reports
  any that were replaced since (threat 8). A red-team run (2026-12-05) rewrote the judge's timer and
  comparison through `torch.sys.modules`, and `torch.softmax` under the reference, for reward 3.
- `TorchOpTracer` is a dispatch mode that records every ATen operator reaching the dispatcher
  while the candidate's forward runs, whether called from Python or from the extension's C++;
  anything beyond allocation, views and metadata is torch doing the candidate's work (threat 1).
  A dispatch mode is thread-local, so a profiler that records all threads runs alongside it and
  catches ops the forward leaves to another thread and waits for (a Python thread, a c10 pool).
- `AllocatorWatch`, the thread census (`new_native_threads`) and hooks.py's `HookWatch` see code of the
  candidate's set to run later inside the judge's own (an allocator, a thread, a trace function, a signal timer, a
  dispatch mode left on its stack): where the timed protocol draws inputs and flushes, outside the timed window.
- `poison_free_memory()` fills the caching allocator's free blocks with NaN bit patterns so an
  output the candidate forgot to write (or memory left over from an earlier call) shows (10).

What this does not protect against: native code that patches CPython or torch internals below
the Python level, or that writes the harness's result file itself. The static policy forbids the
means (file access, threads, dynamic code) and the sandbox layer adds OS isolation.
"""

from __future__ import annotations

import inspect
import os
import threading
from typing import Any

_WATCHED = (
    "time.perf_counter",
    "time.monotonic",
    "torch.cuda.synchronize",
    "torch.cuda.Event",
    "torch.cuda.Event.record",
    "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.synchronize",
    "torch.allclose",
    "torch.isclose",
    "torch.equal",
    "torch.save",
    "torch.load",
    "torch.manual_seed",
    "torch.linalg.vector_norm",
    "torch.Tensor.clone",
    "torch.Tensor.copy_",
    "torch.Tensor.to",
    "torch.Tensor.cpu",
    "torch.Tensor.double",
    "torch.Tensor.__eq__",
    "torch.Tensor.__sub__",
    "torch.Tensor.abs",
    "torch.Tensor.max",
    "torch.nn.Module.__call__",
    "torch.nn.Module._call_impl",
    "json.dump",
    "json.dumps",
)

_NAMESPACES = (
    "torch",
    "torch.nn.functional",
    "torch.linalg",
    "torch.fft",
    "torch.special",
    "torch.cuda",
    "torch.Tensor",
    "torch.nn.Module",
    "torch.nn.Parameter",
    "time",
    "json",
    "statistics",
    "cuda_agent.judge.child.worker",
    "cuda_agent.judge.child.worker.CandidateRun",
    "cuda_agent.judge.child.timed_calls",
    "cuda_agent.judge.child.timed_calls.TimedCalls",
    "cuda_agent.judge.child.stop",
    "cuda_agent.judge.child.timing.Clock",
    "cuda_agent.judge.child.timing.PhaseTiming",
    "cuda_agent.judge.child.compare.OutputCheck",
    "cuda_agent.judge.child.timing",
    "cuda_agent.judge.child.trial",
    "cuda_agent.judge.child.compare",
    "cuda_agent.judge.child.inputs",
    "cuda_agent.judge.child.guards",
    "cuda_agent.judge.child.hooks",
    "cuda_agent.judge.child.hooks.HookWatch",
    "cuda_agent.judge.child.hooks.OperatorWatch",
    "cuda_agent.judge.policy.runtime",
    "cuda_agent.judge.env",
    "cuda_agent.judge.standby",
    "cuda_agent.judge.protocol",
    "cuda_agent.tasks.problem",
    "cuda_agent.tasks.inspection",
)
"""Modules and classes whose every callable attribute is watched (with every class torch.nn defines)."""
_INHERITED = ("torch.Tensor", "torch.nn.Module")
"""Classes whose every attribute is watched as looked up, inherited ones included: a red-team solution (2026-12-05)
replaced `torch.Tensor.tolist`, which the comparison uses and torch.Tensor inherits."""

# ATen operators a candidate's forward may reach: allocation, views and metadata, plus the copy
# that `contiguous()` performs. Everything else means torch did the work.
ALLOWED_ATEN = frozenset(
    """
    empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros zero_
    view _unsafe_view reshape _reshape_alias alias detach t transpose permute unsqueeze squeeze
    expand as_strided slice select split unbind flatten unflatten contiguous clone copy_
    sym_size sym_stride sym_numel sym_storage_offset is_contiguous lift_fresh _to_copy_noop
    resize_ set_ record_stream
    """.split()
)


def _resolve(dotted: str) -> Any:
    import importlib

    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def _namespaces() -> list[tuple[str, Any]]:
    """The watched namespaces: `_NAMESPACES` and every class torch.nn exports (Conv2d.forward, ...)."""
    import torch

    found = []
    for dotted in _NAMESPACES:
        try:
            found.append((dotted, _resolve(dotted)))
        except (ImportError, AttributeError):
            continue
    for name, value in vars(torch.nn).items():
        if isinstance(value, type) and issubclass(value, torch.nn.Module):
            found.append((f"torch.nn.{name}", value))
    return found


def _callables(namespace: Any) -> dict[str, tuple[int, ...]]:
    """name -> identity of the namespace's own callable attributes (functions, classes, methods, modules)."""
    import types

    kinds = (types.ModuleType, staticmethod, classmethod, property, types.GetSetDescriptorType)
    return {
        name: _identity(value)
        for name, value in list(vars(namespace).items())
        if callable(value) or isinstance(value, kinds)
    }


def _identity(value: Any) -> tuple[int, ...]:
    """The object's id, and for a Python function the ids of its code, defaults, keyword defaults and closure
    contents: a red-team solution (2026-12-05) swapped a function's `__code__` and its keyword defaults, which
    leave the function's own id as it was."""
    import types

    function = value.__func__ if isinstance(value, staticmethod | classmethod) else value
    if not isinstance(function, types.FunctionType):
        return (id(value),)
    code, defaults, keywords = function.__code__, function.__defaults__ or (), function.__kwdefaults__ or {}
    contents = []
    for cell in function.__closure__ or ():
        try:
            contents.append(id(cell.cell_contents))
        except ValueError:  # an empty cell
            contents.append(0)
    return (id(value), id(code), *map(id, defaults), *(id(keywords[k]) for k in sorted(keywords)), *contents)


def capture_integrity() -> dict[str, tuple[int, ...]]:
    """id() of every watched function and namespace callable, taken before candidate code runs."""
    captured = {}
    for dotted in _WATCHED:
        try:
            captured[dotted] = _identity(_resolve(dotted))
        except (ImportError, AttributeError):
            continue
    for dotted, namespace in _namespaces():
        for name, ident in _callables(namespace).items():
            captured[f"{dotted}.{name}"] = ident
        if dotted in _INHERITED:  # what the judge calls on tensors may be inherited (Tensor.tolist is TensorBase's)
            for name in dir(namespace):
                try:  # the raw attribute along the class's bases, not a freshly bound method
                    captured[f"{dotted}.{name} (looked up)"] = _identity(inspect.getattr_static(namespace, name))
                except AttributeError:
                    continue
        if dotted.startswith("cuda_agent.") and isinstance(namespace, type):
            # The judge's own classes gain no attributes: a red-team solution (2026-12-05) put a property `ok` on
            # OutputCheck, so every comparison read True.
            captured[f"{dotted} (its names)"] = (hash(tuple(sorted(vars(namespace)))),)
    return captured


def global_module_hooks() -> list[str]:
    """torch.nn's process-wide module hooks that are set: they would run inside the reference's call (a red-team
    solution, 2026-12-05, made the reference return the candidate's output through one)."""
    from torch.nn.modules import module

    return [
        name
        for name, value in vars(module).items()
        if name.startswith("_global_") and isinstance(value, dict) and value
    ]


def changed_functions(captured: dict[str, tuple[int, ...]]) -> list[str]:
    """Watched functions that are no longer the objects captured earlier (names added since are not reported)."""
    current = dict(capture_integrity())
    return [dotted for dotted, ident in captured.items() if current.get(dotted) != ident]


def same_storage(before: Any, after: Any, inputs: list[Any]) -> bool:
    """Whether a call's output `after` holds the storage of the earlier output `before` (still referenced), other
    than an input's storage (an output that is a view of its input is the reference's business, not a stored
    result)."""
    import torch

    from cuda_agent.tasks.inspection import flatten_outputs

    def storages(value: Any) -> set[int]:
        return {
            t.untyped_storage().data_ptr()
            for t in flatten_outputs(value)
            if isinstance(t, torch.Tensor) and t.numel() > 0
        }

    held = {t.untyped_storage().data_ptr() for t in inputs if isinstance(t, torch.Tensor) and t.numel() > 0}
    return bool((storages(before) & storages(after)) - held)


def python_thread_count() -> int:
    return threading.active_count()


def native_threads() -> set[int]:
    """The ids of this process's OS threads (/proc/self/task), Python's and native ones alike; empty without /proc."""
    try:
        return {int(name) for name in os.listdir("/proc/self/task")}
    except OSError:
        return set()


def _thread_name(tid: int) -> str | None:
    try:
        with open(f"/proc/self/task/{tid}/comm") as comm:
            return comm.read().strip()
    except OSError:  # it ended while we looked
        return None


def start_lazy_threads(torch: Any) -> None:
    """Start the threads torch itself starts on first use, before the thread census that candidate code is held to.

    torch's intra-op pool (an OpenMP team: a solution's own `#pragma omp parallel` of the default size reuses it)
    starts at the first parallel operator, and the profiler of `make_tracer` may start threads of its own at its
    first use; both would otherwise first appear while the candidate runs.
    """
    big = torch.ones(1 << 20)
    with make_tracer():
        big.add_(1.0)  # a parallel operator (numel above the grain size), traced
    del big


def new_native_threads(before: set[int], device: str) -> list[str]:
    """Names of the OS threads alive now that were not in `before` (the census taken before candidate code ran).

    A solution's thread alive between its calls can work outside the timed window: red team round 9 kept one
    polling the memory the judge's next input would be drawn into and computed the result during the cache flush.
    The static policy refuses the ways to start one it knows; this sees the thread itself. On CUDA the driver's
    own threads (named `cuda...`) may start later, on first use of a feature: those are left out.
    """
    started = [name for tid in sorted(native_threads() - before) if (name := _thread_name(tid)) is not None]
    return [name for name in started if not (device == "cuda" and name.startswith("cuda"))]


def _allowed(opname: str) -> bool:
    """Whether an ATen op name (e.g. 'relu_', 'empty_like') is allocation, view or metadata only."""
    return opname in ALLOWED_ATEN or opname.removesuffix("_") in ALLOWED_ATEN


def make_tracer() -> Any:
    """A TorchDispatchMode that collects the names of disallowed ATen ops it sees, on every thread."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class TorchOpTracer(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.disallowed: dict[str, int] = {}
            self._profiler = None
            if torch.autograd.kineto_available():
                from torch._C._profiler import _ExperimentalConfig

                config = _ExperimentalConfig(profile_all_threads=True)
                self._profiler = torch.autograd.profiler.profile(use_kineto=True, experimental_config=config)

        def __enter__(self):  # noqa: ANN204
            if self._profiler is not None:
                self._profiler.__enter__()
            return super().__enter__()

        def __exit__(self, *exc: Any) -> None:
            try:
                super().__exit__(*exc)
            finally:
                if self._profiler is not None:
                    self._profiler.__exit__(None, None, None)
                    self._count_profiled_ops()

        def _count_profiled_ops(self) -> None:
            # Top-level ops per thread; those of this thread were counted by the mode already.
            seen: dict[str, int] = {}
            for event in self._profiler.function_events:
                namespace, _, opname = event.name.rpartition("::")
                if event.cpu_parent is None and namespace and not _allowed(opname):
                    key = f"{namespace}.{opname}"
                    seen[key] = seen.get(key, 0) + 1
            for key, count in seen.items():
                self.disallowed[key] = max(self.disallowed.get(key, 0), count)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            name = func.overloadpacket.__name__.removesuffix("_") if func._opname.endswith("_") else func._opname
            if func._opname not in ALLOWED_ATEN and name not in ALLOWED_ATEN:
                key = str(func.overloadpacket)
                self.disallowed[key] = self.disallowed.get(key, 0) + 1
            return func(*args, **(kwargs or {}))

    return TorchOpTracer()


SMALL_REQUEST_BYTES = 2**20
"""The CUDA caching allocator serves requests up to this size (kSmallSize) from its small pool, larger ones from its
large pool: a free small-pool block above it (a whole 2 MiB segment) is taken in pieces of this size."""


def free_block_requests() -> list[int]:
    """Allocation sizes, largest first, that take every free block of the CUDA caching allocator's pool for the
    current device and stream, one by one: the allocator serves a request with the smallest free block of its pool
    that fits (one of that size). Blocks of other streams and of private pools (CUDA graphs) are not this pool's."""
    import torch

    here, stream = torch.cuda.current_device(), torch.cuda.current_stream().cuda_stream
    sizes = []
    for segment in torch.cuda.memory_snapshot():
        if (segment.get("device", here), segment.get("stream")) != (here, stream):
            continue
        if tuple(segment.get("segment_pool_id", (0, 0))) != (0, 0):
            continue
        for block in segment["blocks"]:
            if block["state"] != "inactive":
                continue
            size = block["size"]
            if segment.get("segment_type") == "small":
                while size > SMALL_REQUEST_BYTES:
                    sizes.append(SMALL_REQUEST_BYTES)
                    size -= SMALL_REQUEST_BYTES
            sizes.append(size)
    return sorted(sizes, reverse=True)


def poison_free_memory(device: str) -> None:
    """Fill the free blocks of the CUDA caching allocator's pool (`free_block_requests`) with 0xFF bytes (NaN in
    every float type), so an output the candidate never writes holds no earlier values.

    Each free block is taken by an allocation of its own, filled, then all are given back: nothing new is reserved.
    One allocation of all the free bytes at once, as before, found no cached block that large at KernelBench L1
    sizes, so the allocator gave its cached segments back to the driver and reserved a new one, in every trial.
    """
    if device != "cuda":
        return
    import torch

    taken = []
    for size in free_block_requests():
        try:
            taken.append(torch.empty(size, dtype=torch.uint8, device="cuda"))
        except torch.OutOfMemoryError:  # memory another process took meanwhile: what is taken is still poisoned
            break
        taken[-1].fill_(0xFF)
    del taken


def _loaded_library(name: str) -> Any:
    """The shared library `name` (e.g. "libcudart.so") that this process has loaded, through ctypes; None if none."""
    import ctypes

    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if name in line.split()[-1].rsplit("/", 1)[-1]}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


class AllocatorWatch:
    """Reads which allocator torch hands CPU and CUDA memory out through, from torch's own libraries.

    A solution that installs an allocator of its own (`c10::SetCPUAllocator`, `change_current_allocator`) runs its
    code inside every allocation the judge makes: red team round 8 (2026-12-06) did the whole computation in the
    judge's first allocation after the clock stopped, for reward 3. The static policy refuses the names; this sees
    the swap itself, whatever spelling made it, by comparing the allocators' addresses with those read before
    candidate code ran. Reads only: no allocation and no call that can throw (the CUDA one is a variable read).
    """

    _CPU = "_ZN3c1015GetCPUAllocatorEv"  # c10::GetCPUAllocator()
    _CUDA = "_ZN3c104cuda20CUDACachingAllocator9allocatorE"  # the atomic pointer change_current_allocator stores

    def __init__(self) -> None:
        import ctypes

        self.readers: dict[str, Any] = {}
        c10 = _loaded_library("libc10.so")
        if c10 is not None and hasattr(c10, self._CPU):
            get_cpu = getattr(c10, self._CPU)
            get_cpu.restype, get_cpu.argtypes = ctypes.c_void_p, []
            self.readers["cpu"] = get_cpu
        c10_cuda = _loaded_library("libc10_cuda.so")
        if c10_cuda is not None:
            try:
                pointer = ctypes.c_void_p.in_dll(c10_cuda, self._CUDA)
            except ValueError:  # a torch that keeps it elsewhere: the static policy's refusal stands alone
                pointer = None
            if pointer is not None:
                self.readers["cuda"] = lambda: pointer.value
        self.before = self.read()

    def read(self) -> dict[str, int]:
        return {device: int(reader() or 0) for device, reader in self.readers.items()}

    def replaced(self) -> list[str]:
        """The devices whose allocator is no longer the one read before candidate code ran."""
        now = self.read()
        return [device for device, address in self.before.items() if now.get(device) != address]


class PersistingL2:
    """Reads and resets the persisting-L2 set-aside through the CUDA runtime torch has loaded (threat 16).

    A kernel may mark data as persisting in L2 (an access-policy window plus a larger
    `cudaLimitPersistingL2CacheSize`); such lines survive an ordinary cache flush and make
    repeated timed calls look faster. The judge resets persisting lines before every flush and
    rejects a candidate that raises the set-aside above what it was before candidate code ran
    (the H200 machine reports a non-zero set-aside, 11,796,480 bytes, before anything runs).
    """

    _LIMIT_PERSISTING_L2 = 0x06  # cudaLimitPersistingL2CacheSize

    def __init__(self) -> None:
        self.lib = _loaded_library("libcudart.so")

    @property
    def available(self) -> bool:
        return self.lib is not None

    def limit_bytes(self) -> int:
        import ctypes

        if self.lib is None:
            return 0
        value = ctypes.c_size_t(0)
        self.lib.cudaDeviceGetLimit(ctypes.byref(value), self._LIMIT_PERSISTING_L2)
        return int(value.value)

    def reset(self) -> None:
        if self.lib is not None:
            self.lib.cudaCtxResetPersistingL2Cache()
