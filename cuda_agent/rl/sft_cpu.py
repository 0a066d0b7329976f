"""verl's SFT trainer on the CPU (`trainer.device=cpu`): `torchrun -m cuda_agent.rl.sft_cpu <verl overrides>`.

verl 0.9.1's `initialize_global_process_group` always asks torch for the backend
`cpu:gloo,<device>:<backend>`; on our CPU platform (`cuda_agent.rl.verl_cpu`) that is
`cpu:gloo,cpu:gloo`, which torch rejects ("Duplicate device type cpu"), and without the platform
it asks for NCCL, which a CPU build of torch lacks. This entry point selects the CPU platform, lets
verl's function join a plain gloo group instead, and then runs verl's `sft_trainer.main` unchanged
(`cuda_agent.rl.recipes` launches it in place of `verl.trainer.sft_trainer` when `trainer.device=cpu`).
"""

from __future__ import annotations

import os
from datetime import timedelta


def _join_gloo(timeout_second: int = 36000) -> tuple[int, int, int]:
    import torch.distributed

    torch.distributed.init_process_group(backend="gloo", timeout=timedelta(seconds=timeout_second))
    return int(os.environ["LOCAL_RANK"]), int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])


def main() -> None:
    from cuda_agent.rl.verl_cpu import use_cpu_platform

    use_cpu_platform()
    from cuda_agent.rl.verl_compat import replace_process_group_init

    replace_process_group_init(_join_gloo)
    from verl.trainer.sft_trainer import main as verl_sft_main

    verl_sft_main()


if __name__ == "__main__":
    main()
