"""`python -m utils.profiling [--reference]`: time the solution against eager and torch.compile (read-only file)."""

import sys

from cuda_agent.sandbox.workspace_commands import profiling_command

if __name__ == "__main__":
    sys.exit(profiling_command(sys.argv[1:]))
