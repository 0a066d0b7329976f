"""Fresh inputs for trials and timed phases, drawn from the task's own `get_inputs()`."""

from __future__ import annotations

from typing import Any

ROTATE_BELOW_BYTES = 256 * 2**20
"""The baselines' timed phases rotate over three input sets when one set is smaller than this, so repeated calls
do not all hit the same cached data; larger sets already exceed the cache and cost memory. (The candidate gets a
fresh draw for every call instead: timed_calls.py.)"""


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


def timing_input_sets(module: Any, filename: str, seed: int, device: str, group: int = 1) -> list[list[Any]]:
    """The input sets of a baseline's timed phase: one set, or three when a set is small (see ROTATE_BELOW_BYTES);
    with groups of several calls (`timing.time_phase`), one set per call of a group, as each call of the candidate's
    requests has inputs of its own."""
    import torch

    if group > 1:
        return [make_inputs(module, filename, seed + i, device) for i in range(group)]
    first = make_inputs(module, filename, seed, device)
    size = sum(v.numel() * v.element_size() for v in first if isinstance(v, torch.Tensor))
    if size >= ROTATE_BELOW_BYTES:
        return [first]
    return [first] + [make_inputs(module, filename, seed + i, device) for i in (1, 2)]
