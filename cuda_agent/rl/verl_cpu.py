"""A CPU platform for verl 0.9.1, so its trainer (FSDP engines, Ray workers) runs without a GPU (CI, laptops).

verl ships platforms for CUDA, ROCm and Ascend only and falls back to CUDA when none is found. Its
platform registry is an extension point: importing this module registers `PlatformCPU` under
"cpu", and `VERL_PLATFORM=cpu` selects it in every process (`cuda_agent.rl.launch` sets both for
`trainer.device=cpu`, through the Ray runtime environment, so the trainer's workers get it too).

The platform names Ray's "GPU" resource as its accelerator: the local Ray is started with as many
logical GPUs as the trainer asks for, so verl's placement (one bundle per trainer rank) works
unchanged; the processes see no CUDA and compute on the CPU (gloo collectives). verl's FSDP engines
are registered for cuda/npu only; `VERL_ENGINE_DEVICE=cuda` (verl's own switch) picks the same
engine code. Speed is not a goal here: this runs tiny models to test the wiring.

verl's workers join torch.distributed with the backend string `cpu:gloo,<device>:<backend>`, which
torch rejects when the device is the CPU itself ("Duplicate device type cpu"). So each trainer
worker process joins the gloo group first, at its start: `join_process_group` is the Ray
`worker_process_setup_hook` of the launch (`cuda_agent.rl.launch`), and verl then finds the
group initialised and uses it.
"""

from __future__ import annotations

import contextlib
from typing import Any

from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry

ENV = {"VERL_PLATFORM": "cpu", "VERL_ENGINE_DEVICE": "cuda", "VERL_USE_EXTERNAL_MODULES": __name__}
"""Environment that makes a process (and verl's Ray workers) use this platform."""


def _zero(*args: Any, **kwargs: Any) -> int:
    return 0


class _CpuDeviceModule:
    """Stands in for `torch.cuda`: memory statistics are 0, caches and streams are no-ops."""

    def current_device(self) -> str:
        return "cpu"

    def is_available(self) -> bool:
        return True

    def device_count(self) -> int:
        return 1

    def mem_get_info(self, *args: Any) -> tuple[int, int]:
        return 0, 0

    def get_device_name(self, *args: Any) -> str:
        return "CPU"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _zero


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """verl's platform interface on the CPU."""

    device_name = "cpu"
    vendor_name = "cpu"
    device_module = _CpuDeviceModule()
    cudart = None

    def is_available(self) -> bool:
        return True

    def current_device(self) -> str:
        return "cpu"

    def device_count(self) -> int:
        return 1

    def get_device_capability(self, device_index: int = 0) -> tuple[None, None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    def ray_resource_name(self) -> str:
        return "GPU"  # logical GPUs of the local Ray: one per trainer rank (see the module docstring)

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    @contextlib.contextmanager
    def nvtx_range(self, msg: str):
        yield

    def _nothing(self, *args: Any, **kwargs: Any) -> None:
        return None

    set_device = synchronize = manual_seed = manual_seed_all = _nothing
    set_allocator_settings = empty_cache = profiler_start = profiler_stop = _nothing


def join_process_group() -> None:
    """Ray's worker-process setup hook: in a verl trainer worker (RANK, WORLD_SIZE, MASTER_* set by verl's
    worker group), join the gloo process group; other Ray processes are left alone."""
    import os

    import torch.distributed

    if os.environ.get("WG_BACKEND") != "ray" or "MASTER_PORT" not in os.environ or torch.distributed.is_initialized():
        return
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.distributed.init_process_group(backend="gloo", rank=rank, world_size=world_size)


def use_cpu_platform() -> None:
    """Make this process's verl use `PlatformCPU` (if verl already chose another platform, replace it)."""
    import os

    from verl.plugin.platform.platform_manager import set_platform

    os.environ.update(ENV)
    set_platform(PlatformCPU())
