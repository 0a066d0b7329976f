"""Speed-of-light bounds: bytes and FLOPs counted on the meta device, and the bound's arithmetic."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.evaluation.records import Ceilings, SpeedOfLight
from cuda_agent.evaluation.speed_of_light import estimate, fraction, with_bound
from cuda_agent.tasks import Catalog


def test_counts_bytes_and_flops_of_linear_gelu(tmp_path: Path) -> None:
    task = Catalog().resolve("examples/linear_gelu")  # x 64x256, nn.Linear(256, 256), output 64x256
    sol = estimate([task], tmp_path)[task.ref]
    assert sol.bytes_moved == 4 * (64 * 256 + 256 * 256 + 256 + 64 * 256)
    assert sol.flops == 2 * 64 * 256 * 256
    assert estimate([task], tmp_path)[task.ref] == sol  # the second time from the cache


def test_bound_is_the_larger_of_memory_and_compute_time() -> None:
    ceilings = Ceilings(device="x", copy_bytes_per_s=1e9, flops_per_s=1e12, source="test")
    memory = with_bound(SpeedOfLight(bytes_moved=2_000_000, flops=10**9, how="meta"), ceilings)
    assert (memory.bound_ms, memory.limited_by) == (pytest.approx(2.0), "memory")
    compute = with_bound(SpeedOfLight(bytes_moved=1000, flops=5 * 10**9, how="meta"), ceilings)
    assert (compute.bound_ms, compute.limited_by) == (pytest.approx(5.0), "compute")
    assert fraction(2.0, 4.0) == 0.5 and fraction(None, 4.0) is None
