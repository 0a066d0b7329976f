"""The agent's tools: Bash, Read, Write, Edit, MultiEdit, Glob, Grep, and the `ToolSet` that runs them."""

from cuda_agent.agent.tools.base import EditablePredicate, Observation, Tool, ToolError, Workspace
from cuda_agent.agent.tools.bash import BashTool, CommandRunner, PersistentShell, SandboxShell, Shell, agent_env
from cuda_agent.agent.tools.files import EditTool, MultiEditTool, ReadTool, WriteTool
from cuda_agent.agent.tools.search import GlobTool, GrepTool
from cuda_agent.agent.tools.toolset import ToolsConfig, ToolSet, build_toolset

__all__ = [
    "BashTool",
    "CommandRunner",
    "EditTool",
    "EditablePredicate",
    "GlobTool",
    "GrepTool",
    "MultiEditTool",
    "Observation",
    "PersistentShell",
    "ReadTool",
    "SandboxShell",
    "Shell",
    "Tool",
    "ToolError",
    "ToolSet",
    "ToolsConfig",
    "Workspace",
    "WriteTool",
    "agent_env",
    "build_toolset",
]
