"""Fresh inputs for trials and timed phases, drawn from the task's own `get_inputs()`."""

from __future__ import annotations

from typing import Any

# Robustness trials (threat 12): the task's own distribution, then flipped in sign and
# stretched, so a kernel that only works on, say, non-negative inputs shows. A trial is used
# only where the reference stays finite on the transformed inputs.
TRANSFORMS = ("identity", "negate", "stretch")


def make_inputs(module: Any, filename: str, seed: int, device: str, transform: str = "identity") -> list[Any]:
    """Fresh inputs from the task's get_inputs() under `seed`, with a transform applied to float tensors."""
    from cuda_agent.tasks.problem import draw_inputs

    out = draw_inputs(module, filename, seed, device)
    for i, value in enumerate(out):
        if getattr(value, "is_floating_point", lambda: False)():
            if transform == "negate":
                out[i] = -value
            elif transform == "stretch":
                out[i] = value * 3.0 - 1.0
    return out


def clone_inputs(values: list[Any]) -> list[Any]:
    """Deep copies of tensor inputs in new allocations; other values as they are."""
    import torch

    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def nbytes(values: list[Any]) -> int:
    import torch

    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))
