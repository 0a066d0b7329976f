"""The precision flags that baseline and candidate run under, and the facts a child records in `Verdict.env`.

torch is imported inside the functions, so the grader imports this module (for PROTOCOL_VERSION) at no cost;
facts the grader needs itself, without torch, are in cuda_agent/machine.py.
"""

from __future__ import annotations

import platform
from typing import Any

PROTOCOL_VERSION = "8"
"""Bump when timing or correctness semantics change; it keys the baseline cache."""


def apply_precision_flags() -> dict[str, Any]:
    """Pin full fp32 precision (no TF32) and return the flags as recorded in the verdict."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    return precision_flags()


def precision_flags() -> dict[str, Any]:
    """The global flags that change numerics or speed; compared before and after candidate code."""
    import torch

    return {
        "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "matmul_allow_fp16_reduced": torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "matmul_allow_bf16_reduced": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
        "cudnn_enabled": torch.backends.cudnn.enabled,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "default_dtype": str(torch.get_default_dtype()),
        "grad_enabled": torch.is_grad_enabled(),
        "num_threads": torch.get_num_threads(),
    }


def describe_device(device: str) -> dict[str, Any]:
    """torch, CUDA, driver and device facts for `Verdict.env`."""
    import torch

    info: dict[str, Any] = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "protocol_version": PROTOCOL_VERSION,
        "device": device,
    }
    if device == "cuda":
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        info.update(
            cuda=torch.version.cuda,
            device_name=props.name,
            sm=f"{props.major}.{props.minor}",
            sm_count=props.multi_processor_count,
            l2_bytes=getattr(props, "L2_cache_size", None),
        )
    else:
        info.update(device_name="cpu", cpu=platform.processor() or platform.machine(), threads=torch.get_num_threads())
    return info
