"""Runtime checks that live in the candidate's process (shim.py): each reports to the grader, none decides a pass.

- `TorchOpTracer` is a dispatch mode that records every ATen operator reaching the dispatcher while the candidate's
  forward runs, whether called from Python or from the extension's C++; anything beyond allocation, views and
  metadata is torch doing the candidate's work (threat 1). A dispatch mode is thread-local, so a profiler that
  records all threads runs alongside it and catches ops the forward leaves to another thread and waits for.
- `PersistingL2` reads the persisting-L2 set-aside the candidate's process holds (threat 16).

What this does not protect against: the candidate's code runs in the same process and can see the tracer, silence
it or rewrite what either reports. Such a report can only refuse a solution; the grader's own checks (grader.py)
decide every pass.
"""

from __future__ import annotations

from typing import Any

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
