"""Fresh inputs for trials and timed phases, drawn from the task's own `get_inputs()`."""

from __future__ import annotations

from typing import Any

# Robustness trials (threat 12): the task's own distribution, then flipped in sign and
# stretched, so a kernel that only works on, say, non-negative inputs shows. A trial is used
# only where the reference stays finite on the transformed inputs.
TRANSFORMS = ("identity", "negate", "stretch")


def make_inputs(module: Any, filename: str, seed: int, device: str, transform: str = "identity") -> list[Any]:
    """Seed torch, call get_inputs(), move tensors to `device` and apply a transform to float tensors."""
    import torch

    from cuda_agent.tasks.problem import call_inputs

    torch.manual_seed(seed)
    values = call_inputs(module, filename, "get_inputs")
    out = []
    for value in values:
        if isinstance(value, torch.Tensor):
            value = value.to(device)
            if value.is_floating_point() and transform == "negate":
                value = -value
            elif value.is_floating_point() and transform == "stretch":
                value = value * 3.0 - 1.0
        out.append(value)
    return out


def clone_inputs(values: list[Any]) -> list[Any]:
    """Deep copies of tensor inputs in new allocations; other values as they are."""
    import torch

    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def nbytes(values: list[Any]) -> int:
    import torch

    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))
