"""The agent's workspace: lay one out for a task, know what may be edited, build its kernels fast."""

from cuda_agent.workspace.build import BuildOutcome, build_tree
from cuda_agent.workspace.create import create_workspace, read_task_record, workspace_language
from cuda_agent.workspace.layout import (
    EDITABLE,
    EXTENSION_NAME,
    KERNEL_SUFFIXES,
    is_editable,
    source_name,
    tampered_files,
    walk,
)

__all__ = [
    "EDITABLE",
    "EXTENSION_NAME",
    "KERNEL_SUFFIXES",
    "BuildOutcome",
    "build_tree",
    "create_workspace",
    "is_editable",
    "read_task_record",
    "source_name",
    "tampered_files",
    "walk",
    "workspace_language",
]
