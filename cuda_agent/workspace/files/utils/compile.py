"""`bash utils/compile.sh`: build kernels/ into cuda_extension (read-only file; see SKILL.md).

The logic is `cuda_agent.sandbox.workspace_commands`; this file hands over to it without importing cuda_agent,
so the workspace package, which sits below the sandbox in the layers, never reaches up into it. `-P` keeps the
workspace folder off the tool's import path: nothing the agent leaves there can stand in for our modules.
"""

import os
import sys

if __name__ == "__main__":
    tool = [sys.executable, "-P", "-m", "cuda_agent.sandbox.workspace_commands", "compile"]
    os.execv(sys.executable, [*tool, *sys.argv[1:]])
