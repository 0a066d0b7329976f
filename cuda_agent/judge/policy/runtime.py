"""The runtime half of the policies: how much of forward is the candidate's own, and whether its kernels count.

Runs inside the candidate's process (child/shim.py), after the correctness trials and timing, on fresh
inputs, each on one extra untimed call of forward:

- `custom_time_fraction` (every policy; `Verdict.custom_kernel_time_fraction`): the share of
  forward's time spent in the candidate's own code rather than in torch's operators. On CUDA it is
  device time from the profiler: a kernel (or copy) that the profiler links to a torch operator
  (`aten::mm`, ...) is torch's, every other one was launched by the candidate's code (its kernels,
  and cuBLAS/cuDNN calls it makes itself). On the CPU it is wall time: time inside calls of the
  compiled extension minus the torch operators those calls run, against the time of the torch
  operators forward runs; Python glue counts for neither. Wall time swings with other load on a
  shared machine, so the CPU figure is the median of three calls and still only approximate.
- `torch_only_reason` (kernelbench policy): a dataflow check that the candidate's kernels reach its
  outputs. A dispatch mode follows every torch operator of the call: a tensor is "torch's" when it
  existed before the call or a torch operator computed it from torch's tensors, and it still holds
  what torch wrote (a fingerprint of its contents). Memory that torch only allocated, and tensors
  whose contents changed behind torch's back, were written by the candidate's code. If every
  output is torch's (or a copy of a torch tensor's contents), the kernels were a decoy: all-torch
  forward, a kernel on the side, a kernel that copies torch's result or rewrites it unchanged.
  A tensor the candidate wrote that lies within twice the correctness tolerance of one torch computed
  (same size, compared on positions drawn per judgement, elementwise and normwise) counts as torch's
  too: its kernel changed nothing the correctness check could see. A forward that has torch
  compute the whole result and a "kernel" move one element by one ulp is such a case; so is a
  kernel that scales torch's result by 1.0001 or recomputes one element of it is the same case.

What this does not protect against: a kernel that does a small but visible share of the work (a
cheap epilogue after torch did the heavy part is legitimate here); the fraction reports how small
its share is, and the reader judges. Torch work hidden from the dispatcher (a key guard, torch's
compiler) is refused by the static policy, not detected here; a tensor created outside the
dispatcher (`from_blob`) counts as one that existed before the call, which can only make a
legitimate solution look like torch's.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_SAMPLE = 4096
"""Positions per tensor size at which candidate-written tensors are compared with torch's: an output that differs
from torch's on 0.2 % of its elements is told apart with a chance of 1 - 3e-4."""
_NEAR = 2.0
"""Two tensors that each pass the correctness check against the reference lie within twice its tolerance."""
_CHUNK = 1 << 24
"""Elements fingerprinted at a time, so the float64 copy stays 128 MB whatever the tensor's size."""
_ALLOCATION_OPS = frozenset(
    "empty empty_like empty_strided empty_permuted new_empty new_empty_strided resize_ set_".split()
)
_VIEW_AND_ALLOCATION = frozenset(
    """
    empty empty_like empty_strided empty_permuted new_empty new_empty_strided view _unsafe_view reshape
    _reshape_alias alias detach t transpose permute unsqueeze squeeze expand as_strided slice select split unbind
    flatten unflatten contiguous sym_size sym_stride sym_numel sym_storage_offset is_contiguous lift_fresh
    _to_copy_noop resize_ set_ record_stream
    """.split()
)


_MARK = "cuda_agent::dataflow_call"
"""A profiler annotation around the checked call: its thread is forward's own."""


def _opname(func: Any) -> str:
    return func.overloadpacket.__name__


def _is_extension_function(obj: Any) -> bool:
    """A pybind11 function of a compiled extension, outside torch's own modules.

    pybind11 binds a builtin to its function record: a PyCapsule in older releases, a
    `pybind11_detail_function_record_*` object since 2.12 (torch 2.13's build shows the latter).
    """
    if type(obj).__name__ != "builtin_function_or_method":
        return False
    module = getattr(obj, "__module__", None) or ""
    record = type(getattr(obj, "__self__", None)).__name__
    return (record == "PyCapsule" or record.startswith("pybind11")) and not module.startswith("torch")


class ProfileUnreadable(Exception):
    """The profiler's events could not be read (an API this torch lacks): our limitation, not the candidate's."""


def custom_time_fraction(
    call: Callable[[], Any], device: str, sync: Callable[[], None], own_clock: Callable[[], float] | None = None
) -> float | None:
    """Share of one call's time spent in the candidate's own code, in [0, 1]; None when nothing was measured.

    Args:
        call: runs forward on fresh inputs (under no_grad; three times on the CPU); its exceptions propagate.
        device: 'cuda' (device time from the profiler) or 'cpu' (wall time, see the module docstring).
        sync: waits for the device.
        own_clock: CPU only: seconds so far in the candidate's own code outside compiled extensions (Triton's
            interpreted launches, child/triton_launch.py), counted as its own.

    Raises:
        ProfileUnreadable: the profiler's events lack what the CUDA split reads.
    """
    if device == "cuda":
        own_s, torch_s = _split_cuda(call, sync)
        return None if own_s + torch_s <= 0 else own_s / (own_s + torch_s)
    # Wall time on a shared CPU swings with other load (a descheduled OpenMP thread): the median of three calls.
    splits = (_split_cpu(call, own_clock) for _ in range(3))
    shares = sorted(own / (own + other) for own, other in splits if own + other > 0)
    return shares[len(shares) // 2] if shares else None


def _split_cuda(call: Callable[[], Any], sync: Callable[[], None]) -> tuple[float, float]:
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    sync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        call()
        sync()
    try:
        events = prof.events()
        device_us = sum(e.time_range.elapsed_us() for e in events if e.device_type == DeviceType.CUDA)
        # Kernels the profiler links to an operator ("aten::mm") are torch's; those linked to a runtime call
        # made outside any operator (cudaLaunchKernel, cublas...) or to nothing were launched by the candidate.
        ops = [e for e in events if e.device_type == DeviceType.CPU and "::" in e.name]
        torch_us = sum(k.duration for e in ops for k in e.kernels)
    except (AttributeError, TypeError) as exc:  # a field this torch's FunctionEvent lacks
        raise ProfileUnreadable(f"{type(exc).__name__}: {exc}") from exc
    torch_us = min(torch_us, device_us)
    return (device_us - torch_us) / 1e6, torch_us / 1e6


@dataclass
class _CpuClock:
    """Seconds inside extension calls, and in torch operators inside and outside them."""

    extension_s: float = 0.0
    torch_inside_s: float = 0.0
    torch_outside_s: float = 0.0
    depth: int = 0


def _split_cpu(call: Callable[[], Any], own_clock: Callable[[], float] | None = None) -> tuple[float, float]:
    from torch.utils._python_dispatch import TorchDispatchMode

    clock = _CpuClock()
    starts: list[float] = []

    class _OpClock(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            start = time.perf_counter()
            out = func(*args, **(kwargs or {}))
            seconds = time.perf_counter() - start
            if clock.depth:
                clock.torch_inside_s += seconds  # allocation included: the extension's own time excludes it
            elif _opname(func) not in _VIEW_AND_ALLOCATION:
                clock.torch_outside_s += seconds
            return out

    def on_event(_frame: Any, event: str, arg: Any) -> None:
        if event == "c_call" and _is_extension_function(arg):
            starts.append(time.perf_counter())
            clock.depth += 1
        elif event in ("c_return", "c_exception") and _is_extension_function(arg) and starts:
            clock.extension_s += time.perf_counter() - starts.pop()
            clock.depth -= 1

    previous = sys.getprofile()
    before = own_clock() if own_clock is not None else 0.0
    sys.setprofile(on_event)
    try:
        with _OpClock():
            call()
    finally:
        sys.setprofile(previous)
    own = max(clock.extension_s - clock.torch_inside_s, 0.0)
    own += (own_clock() - before) if own_clock is not None else 0.0
    return own, clock.torch_inside_s + clock.torch_outside_s


@dataclass(frozen=True)
class Tolerance:
    """The correctness check's tolerances (JudgeConfig's atol, rtol, norm_rtol)."""

    atol: float
    rtol: float
    norm_rtol: float


def torch_only_reason(
    call: Callable[[], Any], sources: list[Any], sync: Callable[[], None], tolerance: Tolerance
) -> str | None:
    """Why the call's outputs are torch's work alone, or None when the candidate's kernels reach them.

    Args:
        call: runs forward once on fresh inputs (under no_grad) and returns its output.
        sources: tensors that exist before the call (inputs, parameters, buffers): torch's by definition,
            fingerprinted now so that a kernel writing into one of them shows.
        sync: waits for the device (before fingerprints, so that pending kernels have written).
        tolerance: the correctness check's; a candidate-written tensor within twice of it from one of torch's
            counts as torch's.
    """
    import torch
    from torch.utils._pytree import tree_flatten

    flow = _Dataflow(sync, tolerance)
    for tensor in sources:
        flow.record(tensor, pure=True)
    with _all_threads_profiler() as prof, torch.autograd.profiler.record_function(_MARK), flow.mode():
        out = call()
    sync()
    hidden = _ops_on_other_threads(prof) if prof is not None else {}
    if hidden:
        ops = ", ".join(f"{name} x{count}" for name, count in sorted(hidden.items()))
        return (
            f"torch ran operators on another thread during forward ({ops}), out of the dataflow check's sight; "
            "call torch from forward's own thread"
        )
    outputs = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
    if outputs and all(flow.is_pure(o) for o in outputs):
        if flow.near_hits:
            return (
                "forward's outputs are torch's work alone: a tensor torch computed already holds them within twice "
                "the correctness tolerance, so your kernels changed nothing the check can see (a token kernel on "
                "torch's result); under the kernelbench policy your kernels must compute part of the output"
            )
        return (
            "forward's outputs are torch's work alone: no result of your own kernels reaches them (all-torch forward, "
            "a kernel on the side, or one that copies or rewrites torch's result unchanged); under the kernelbench "
            "policy your kernels must compute part of the output"
        )
    return None


def _all_threads_profiler() -> Any:
    """A profiler of every thread's torch operators (a dispatch mode sees only its own thread), if kineto is there."""
    import contextlib

    import torch

    if not torch.autograd.kineto_available():
        return contextlib.nullcontext()
    from torch._C._profiler import _ExperimentalConfig

    config = _ExperimentalConfig(profile_all_threads=True)
    return torch.autograd.profiler.profile(use_kineto=True, experimental_config=config)


def _ops_on_other_threads(prof: Any) -> dict[str, int]:
    """Compute operators that ran outside the marked call's thread (top-level events of another thread)."""
    events = prof.function_events
    own = {event.thread for event in events if event.name == _MARK}
    counts: dict[str, int] = {}
    for event in events:
        namespace, _, name = event.name.rpartition("::")
        other = event.thread not in own and event.cpu_parent is None
        if other and namespace == "aten" and name not in _VIEW_AND_ALLOCATION:
            counts[name] = counts.get(name, 0) + 1
    return counts


class _Dataflow:
    """Which tensors hold torch's work: key (storage, offset, shape, stride, dtype) -> (fingerprint, torch's)."""

    def __init__(self, sync: Callable[[], None], tolerance: Tolerance) -> None:
        import secrets

        self.sync = sync
        self.tolerance = tolerance
        self.records: dict[tuple, tuple[tuple, bool]] = {}
        self.pure_prints: set[tuple] = set()
        self.weights: dict[tuple[int, str], Any] = {}
        self.pure_samples: dict[int, list[Any]] = {}
        """Element count -> float64 samples of torch's floating tensors of that size (`sample`)."""
        self.positions: dict[tuple[int, str], Any] = {}
        self.seed = secrets.randbits(62)
        """Where the samples are taken: drawn per judgement, so a kernel cannot leave those positions alone."""
        self.near_hits = 0
        """Candidate-written tensors found within the tolerance of one of torch's."""

    def key(self, tensor: Any) -> tuple | None:
        import torch

        if tensor.layout != torch.strided or tensor.device.type == "meta":
            return None
        storage = tensor.untyped_storage().data_ptr()
        return storage, tensor.storage_offset(), tuple(tensor.shape), tuple(tensor.stride()), tensor.dtype

    def fingerprint(self, tensor: Any) -> tuple:
        """Two float64 sums (plain and position-weighted) of the contents, chunk by chunk; NaN and inf mapped."""
        import torch

        flat = tensor.detach().reshape(-1)
        if flat.is_complex():
            flat = torch.view_as_real(flat).reshape(-1)
        total = weighted = 0.0
        for start in range(0, flat.numel(), _CHUNK):
            chunk = flat[start : start + _CHUNK].to(torch.float64)
            chunk = torch.nan_to_num(chunk, nan=7.0, posinf=11.0, neginf=-13.0)
            total += float(chunk.sum())
            weighted += float((chunk * self._weights(chunk.numel(), chunk.device)).sum())
        return tuple(tensor.shape), str(tensor.dtype), total, weighted

    def _weights(self, n: int, device: Any) -> Any:
        import torch

        key = (n, str(device))
        if key not in self.weights:
            self.weights[key] = torch.arange(n, dtype=torch.float64, device=device).remainder_(4093).add_(1)
        return self.weights[key]

    def sample(self, tensor: Any) -> Any:
        """The tensor's values at this judgement's positions for its size (row-major), in float64, NaN and inf
        mapped as in `fingerprint`; all of them for a tensor of at most `_SAMPLE` elements."""
        import torch

        flat = tensor.detach().reshape(-1)
        key = (flat.numel(), str(flat.device))
        if key not in self.positions:
            if flat.numel() <= _SAMPLE:
                where = torch.arange(flat.numel())
            else:
                generator = torch.Generator().manual_seed(self.seed ^ flat.numel())
                where = torch.randint(flat.numel(), (_SAMPLE,), generator=generator)
            self.positions[key] = where.to(flat.device)
        values = flat[self.positions[key]].to(torch.float64)
        return torch.nan_to_num(values, nan=7.0, posinf=11.0, neginf=-13.0)

    def near_pure(self, tensor: Any) -> bool:
        """Whether a tensor the candidate wrote lies within twice the correctness tolerance of one of torch's."""
        if not tensor.is_floating_point() or tensor.numel() == 0:
            return False
        tol = self.tolerance
        mine = None
        for theirs in self.pure_samples.get(tensor.numel(), ()):
            mine = self.sample(tensor) if mine is None else mine
            diff = (mine - theirs).abs()
            elementwise = bool((diff <= _NEAR * (tol.atol + tol.rtol * theirs.abs())).all())
            if elementwise and float(diff.norm()) <= _NEAR * tol.norm_rtol * float(mine.norm()):
                self.near_hits += 1
                return True
        return False

    def record(self, tensor: Any, pure: bool) -> None:
        key = self.key(tensor)
        if key is None:
            return
        print_ = self.fingerprint(tensor)
        self.records[key] = (print_, pure)
        if pure:
            self.pure_prints.add(print_)
            if tensor.is_floating_point() and tensor.numel() > 0:
                self.pure_samples.setdefault(tensor.numel(), []).append(self.sample(tensor))

    def is_pure(self, tensor: Any) -> bool:
        """Torch's work: recorded as torch's and unchanged since, (a copy of) the contents of a torch tensor, or
        within twice the correctness tolerance of one (`near_pure`)."""
        key = self.key(tensor)
        if key is None:
            return False
        record = self.records.get(key)
        if record is None:
            return True  # existed before the call (or was made outside the dispatcher)
        print_ = self.fingerprint(tensor)
        return (record[1] and record[0] == print_) or print_ in self.pure_prints or self.near_pure(tensor)

    def mode(self) -> Any:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_flatten

        flow = self

        class _FlowMode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
                kwargs = kwargs or {}
                flow.sync()
                tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
                pure = _opname(func) not in _ALLOCATION_OPS and all(flow.is_pure(t) for t in tensors)
                out = func(*args, **kwargs)
                flow.sync()
                written = [
                    value
                    for arg, value in zip(func._schema.arguments, args, strict=False)
                    if arg.alias_info is not None and arg.alias_info.is_write and isinstance(value, torch.Tensor)
                ]
                for tensor in [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)] + written:
                    flow.record(tensor, pure)
                return out

        return _FlowMode()
