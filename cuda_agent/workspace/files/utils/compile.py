"""`bash utils/compile.sh`: build kernels/ into cuda_extension (read-only file; see SKILL.md)."""

import sys

from cuda_agent.sandbox.workspace_commands import compile_command

if __name__ == "__main__":
    sys.exit(compile_command(sys.argv[1:]))
