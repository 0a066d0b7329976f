"""Threat 16: persisting-L2 windows or evict-last policies that survive the judge's cache flush (static policy)."""

from __future__ import annotations

import pytest

from tests.judge.threats._static import checks, expect, solution


def test_template_is_legit() -> None:
    assert checks(solution()) == set()


@pytest.mark.parametrize(
    "launch",
    [
        "cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 1 << 20);",
        "cudaStreamAttrValue attr; attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;",
        "cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, nullptr);",
        "cudaCtxResetPersistingL2Cache();",
        'asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));',
    ],
    ids=["limit", "window", "stream_attribute", "reset", "ptx_evict_last"],
)
def test_rejects_l2_persistence(launch: str) -> None:
    assert checks(solution(launch=launch)) == expect({"l2_persistence"})
