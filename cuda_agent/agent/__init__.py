"""The agent: tools on a workspace, model backends, context budget, and trajectory recording.

The episode loop (`loop.py`) wires these together; nothing here imports the judge (the agent
reaches it only through the sandbox or the workspace's own utils/ scripts).
"""

from cuda_agent.agent.context import ContextBudget, estimate_tokens, truncate_middle
from cuda_agent.agent.models import Model, ModelTurn, OpenAIModel, ReplayModel, get_model
from cuda_agent.agent.tools import Observation, ToolsConfig, ToolSet, build_toolset
from cuda_agent.agent.trajectory import TrajectoryError, TrajectoryWriter, read_trajectory

__all__ = [
    "ContextBudget",
    "Model",
    "ModelTurn",
    "Observation",
    "OpenAIModel",
    "ReplayModel",
    "ToolSet",
    "ToolsConfig",
    "TrajectoryError",
    "TrajectoryWriter",
    "build_toolset",
    "estimate_tokens",
    "get_model",
    "read_trajectory",
    "truncate_middle",
]
