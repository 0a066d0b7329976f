"""guards.poison_free_memory on a GPU: every free block of the allocator's pool is NaN after it, none is added."""

from __future__ import annotations

import pytest

from cuda_agent.judge.child.guards import free_block_requests, poison_free_memory

pytestmark = pytest.mark.gpu


def test_every_free_block_is_poisoned_and_nothing_new_is_reserved() -> None:
    import torch

    torch.cuda.empty_cache()
    kept = []
    for mib in (300, 7, 64, 2, 300, 129):  # blocks of several sizes, two alike, freed between kept ones
        freed = torch.ones(mib * 2**18, device="cuda")  # float32: `mib` MiB
        kept.append(torch.ones(2**18, device="cuda"))
        del freed
    small = [torch.ones(1000, device="cuda") for _ in range(5)]
    del small  # small-pool blocks too
    torch.cuda.synchronize()
    reserved = torch.cuda.memory_reserved()
    free = reserved - torch.cuda.memory_allocated()
    poison_free_memory("cuda")
    torch.cuda.synchronize()
    assert torch.cuda.memory_reserved() == reserved  # no segment given back, none reserved anew
    # Taking the free bytes again, block by block as the allocator hands them out, reads nothing but 0xFF.
    taken = [torch.empty(size, dtype=torch.uint8, device="cuda") for size in free_block_requests()]
    assert torch.cuda.memory_reserved() == reserved, "taking the free blocks one by one reserved more"
    assert sum(t.numel() for t in taken) == free
    assert all(bool((t == 0xFF).all()) for t in taken)  # (each comparison's result needs memory of its own)
    del kept
