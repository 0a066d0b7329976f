"""Which CPU cores the local pool's timing workers keep for themselves, and which its builds share.

A timed judgement launches its kernels from the CPU: with every core busy compiling (nvcc, ninja,
cicc of the agents' builds), a launch or a CUDA-event read can wait for a core, and small kernels
time slower than they run. So each timing worker gets cores no build touches, and the builds share
the rest. Pinning is set on the runner process (runner.py), so every process it starts inherits it.
"""

from __future__ import annotations

import os

from pydantic import BaseModel, Field


class CpuPlan(BaseModel):
    """Cores per worker kind; empty lists mean "not pinned" (any core)."""

    build: list[int] = Field(default_factory=list)
    timing: list[list[int]] = Field(default_factory=list, description="Cores of each timing slot, in slot order.")
    note: str = ""
    """Why the pool does not pin, when it does not."""

    def as_metrics(self) -> dict[str, list[int]]:
        if not self.build:
            return {}
        return {"build": self.build} | {f"timing-{i}": cores for i, cores in enumerate(self.timing)}


def plan_cpu_sets(n_timing: int, cores_per_timing: int = 2, pin: bool | None = None) -> CpuPlan:
    """Set `cores_per_timing` cores aside for each of `n_timing` timing workers.

    Args:
        n_timing: timing workers (GPUs, or CPU timing slots).
        cores_per_timing: cores each timing worker keeps (it runs one judgement: one launching thread,
            plus input generation and the reference's host work).
        pin: True pins whenever at least one core is left for builds; None (default) pins only when
            the builds keep at least half of the cores (on a small machine the build time matters more);
            False never pins.
    """
    available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    reserved = n_timing * cores_per_timing
    left = len(available) - reserved
    if pin is False:
        return CpuPlan(note="pinning turned off")
    if not available or n_timing < 1 or cores_per_timing < 1:
        return CpuPlan(note="this OS does not report CPU affinity" if not available else "no timing workers")
    enough = left >= 1 if pin else left >= max(2, len(available) // 2)
    if not enough:
        return CpuPlan(
            note=f"{len(available)} cores are too few to keep {cores_per_timing} for each of {n_timing} "
            "timing workers and still build: timings may slow while builds run"
        )
    # The timing workers take the highest-numbered cores: the OS and interrupts favour core 0.
    timing = [available[left + i * cores_per_timing : left + (i + 1) * cores_per_timing] for i in range(n_timing)]
    return CpuPlan(build=available[:left], timing=timing)
