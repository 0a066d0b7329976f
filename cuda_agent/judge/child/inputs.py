"""Fresh inputs for trials and timed phases, drawn from the task's own `get_inputs()`."""

from __future__ import annotations

from typing import Any


def make_inputs(module: Any, filename: str, seed: int, device: str, transform: str = "identity") -> list[Any]:
    """Fresh inputs from the task's get_inputs() under `seed`, with a transform applied to float tensors.

    Transforms serve the robustness trials (threat 12): 'negate' flips signs and 'stretch' maps x to
    3x - 1, so a kernel that only works on, say, non-negative inputs shows.
    """
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
