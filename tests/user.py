"""Commands as a user types them: the installed `cuda-agent` entry point, in a child process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CUDA_AGENT = Path(sys.executable).parent / "cuda-agent"
"""The console script pip installed beside this interpreter (what README's commands run)."""


def cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout_s: float = 300
) -> subprocess.CompletedProcess:
    """Run `cuda-agent ARGS` with our environment plus `env`; its exit code, stdout and stderr."""
    return subprocess.run(
        [str(CUDA_AGENT), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        timeout=timeout_s,
    )
