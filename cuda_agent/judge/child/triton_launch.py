"""Triton in the candidate's process: its settings for one judgement, its interpreter on the CPU, its launches counted.

`TritonLaunches.install(device, folder)` runs in the candidate's process (shim.py) before a Triton solution is
imported:

- Triton's cache, dump and override folders (`TRITON_CACHE_DIR`, `TRITON_DUMP_DIR`, `TRITON_OVERRIDE_DIR`,
  `TRITON_HOME`) lie in the candidate's own folder, which is fresh for each judgement and read by nothing of ours:
  a kernel compiled for one candidate is never loaded for another, and nothing the candidate leaves there is read
  back. Whatever our environment named (a shared `~/.triton`) is replaced.
- On the CPU, `TRITON_INTERPRET=1` (set when the process starts, standby.worker_spec): `@triton.jit` makes an interpreted function whose launches run the kernel's
  body with numpy, so the CPU judge runs Triton kernels for real. Autotune's benchmarker needs a GPU driver; under
  the interpreter it is replaced by a wall-clock one (the pick still happens, on the first call, untimed).
- A kernel's compile is told from its run (triton_compile.py): on a GPU the launch's compile is marked, on the CPU
  each new specialisation of an interpreted kernel is first compiled for real for the H100/H200 (sm_90), so that a
  kernel the compiler refuses is the candidate's compile_error there too, not a run of Python the interpreter took.
- Every launch of a `@triton.jit` function (through `kernel[grid](...)`, autotune and heuristics alike) is counted;
  `take()` reads and resets the count of one call of forward. A forward that launches nothing is refused by the
  grader, as a CUDA forward that never calls its extension is.
- An interpreted launch runs with torch's dispatch modes suspended and under a profiler range without a namespace:
  the interpreter's own copies between its host and device views are torch operators that are not the candidate's,
  and the ATen tracer (which counts top-level operators only) and the kernelbench dataflow check must see the
  kernel's writes as the candidate's, as they see a compiled kernel's.

What this does not protect against: the count is the candidate's process's report, which its code could change;
it can only refuse. What a kernel computes is judged from its outputs alone.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_FOLDERS = {"TRITON_CACHE_DIR": "cache", "TRITON_DUMP_DIR": "dump", "TRITON_OVERRIDE_DIR": "override"}
_RANGE = "triton interpreter launch"
"""The profiler range around an interpreted launch: no `::`, so the tracer counts neither it nor what it holds."""


class TritonLaunches:
    """The launch count of the candidate's Triton kernels, and the patches that keep it."""

    def __init__(self) -> None:
        self.count = 0
        self.interpreted_s = 0.0
        """Seconds spent in interpreted launches so far: the CPU's own-time share counts them as the candidate's
        (policy/runtime.custom_time_fraction), as it counts time inside a compiled extension's calls."""
        self.ahead: Any = None
        """On the CPU, the compiler of interpreted kernels for the GPU (triton_compile.AheadCompiler)."""
        self.env: dict[str, Any] = {}
        """What the verdict records: Triton's version, whether it interprets, where its cache was."""

    @classmethod
    def install(cls, device: str, folder: Path) -> TritonLaunches:
        """Set Triton up for this judgement (module docstring) and start counting; imports triton.

        Raises:
            ImportError: triton is not installed where the candidate's process runs.
        """
        root = folder / "triton"
        os.environ["TRITON_HOME"] = str(root)
        for name, sub in _FOLDERS.items():
            os.environ[name] = str(root / sub)
        # Again for a process started without it (a triton imported before now made triton.language's own
        # functions for the other mode).
        interpret = device != "cuda"
        if interpret:
            os.environ["TRITON_INTERPRET"] = "1"
        else:
            os.environ.pop("TRITON_INTERPRET", None)
        import triton
        from triton.runtime import autotuner, interpreter, jit

        from cuda_agent.judge.child.triton_compile import AheadCompiler, mark_compiles

        mark_compiles()
        self = cls()
        self.ahead = AheadCompiler() if interpret else None
        jit.JITFunction.run = self._counted(jit.JITFunction.run, interpreted=False)
        interpreter.InterpretedFunction.run = self._counted(interpreter.InterpretedFunction.run, interpreted=True)
        if interpret:
            autotuner.Autotuner.do_bench = property(lambda tuner: tuner._do_bench or wall_bench)
        self.env = {"triton": triton.__version__, "triton_interpret": interpret, "triton_cache_dir": str(root)}
        return self

    def take(self) -> int:
        """Launches since the last take (one call of forward)."""
        count, self.count = self.count, 0
        return count

    def _counted(self, run: Callable[..., Any], interpreted: bool) -> Callable[..., Any]:
        def counted_run(kernel: Any, *args: Any, **kwargs: Any) -> Any:
            if not kwargs.get("warmup"):
                self.count += 1
            if not interpreted:
                return run(kernel, *args, **kwargs)
            import torch
            from torch.utils._python_dispatch import _disable_current_modes

            # The CPU share's profile hook is off inside: the interpreter's own pybind11 calls are not an extension's.
            hook, start = sys.getprofile(), time.perf_counter()
            sys.setprofile(None)
            try:
                with _disable_current_modes(), torch.autograd.profiler.record_function(_RANGE):
                    if self.ahead is not None and not kwargs.get("warmup"):
                        options = {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}
                        self.ahead.compile(kernel, args, options)
                    return run(kernel, *args, **kwargs)
            finally:
                sys.setprofile(hook)
                self.interpreted_s += time.perf_counter() - start

        return counted_run


def wall_bench(kernel_call: Callable[[], Any], quantiles: tuple[float, ...] = (0.5,)) -> list[float]:
    """Autotune's benchmark under the interpreter: the median of three wall-clock runs, in ms, for every quantile."""
    times = []
    for _ in range(3):
        start = time.perf_counter()
        kernel_call()
        times.append((time.perf_counter() - start) * 1e3)
    return [sorted(times)[1]] * len(quantiles)
