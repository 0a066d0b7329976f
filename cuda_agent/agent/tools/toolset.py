"""The tool set of one episode: dispatch by name, argument parsing, and agent mistakes turned into observations.

This is the one place where a tool call from the model becomes a `ToolResult`. Unknown tools,
arguments that are not a JSON object, calls a backend could not parse, refused paths and bad
argument types all come back as `is_error=True` results whose text says what is allowed, so
the loop can send them to the model and go on (STYLE.md 8.6, "agent mistake").
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.agent.context import truncate_middle
from cuda_agent.agent.tools.base import (
    DEFAULT_EDITABLE_HINT,
    EditablePredicate,
    Observation,
    Tool,
    ToolError,
    Workspace,
)
from cuda_agent.agent.tools.bash import BashTool, CommandRunner, PersistentShell, SandboxShell, agent_env
from cuda_agent.agent.tools.files import EditTool, MultiEditTool, ReadLog, ReadTool, WriteTool
from cuda_agent.agent.tools.search import GlobTool, GrepTool
from cuda_agent.types import ToolCall, ToolResult


class ToolsConfig(BaseModel):
    """Limits of the episode's tools."""

    model_config = ConfigDict(extra="forbid")

    bash_timeout_s: float = Field(default=600.0, gt=0, description="Longest a Bash command may run, in seconds.")
    bash_output_cap_bytes: int = Field(default=30_000, gt=1000, description="Bash output kept (head and tail).")
    max_output_chars: int = Field(default=40_000, gt=1000, description="Cap on any tool's text sent to the model.")
    editable_hint: str = Field(
        default=DEFAULT_EDITABLE_HINT, description="Told to the model when it edits a protected file."
    )


class ToolSet:
    """Tools by name, run against one workspace. Use as a context manager so the shell is closed.

    Args:
        tools: the tools; names must be unique.
        max_output_chars: every result's text is cut to this many characters (head and tail kept).
    """

    def __init__(self, tools: Sequence[Tool], max_output_chars: int = 40_000) -> None:
        self.tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self.tools:
                raise ValueError(f"two tools are named {tool.name!r}")
            self.tools[tool.name] = tool
        self.max_output_chars = max_output_chars

    def schemas(self) -> list[dict[str, Any]]:
        """The OpenAI function-calling schemas of all tools, for `Model.complete(messages, tools)`."""
        return [tool.schema() for tool in self.tools.values()]

    def execute(self, call: ToolCall) -> ToolResult:
        """Run one call; every agent mistake becomes an error result, never an exception."""
        start = time.monotonic()
        observation = self._observe(call)
        text, cut = truncate_middle(observation.text, self.max_output_chars)
        return ToolResult(
            tool_call_id=call.id,
            name=call.name,
            output=text,
            is_error=observation.is_error,
            truncated=observation.truncated or cut,
            metadata=observation.metadata,
            duration_s=time.monotonic() - start,
        )

    def _observe(self, call: ToolCall) -> Observation:
        if call.error is not None:
            return _error(f"your tool call could not be parsed: {call.error}. {self._call_format()}")
        tool = self.tools.get(call.name)
        if tool is None:
            return _error(f"there is no tool named {call.name!r}. {self._call_format()}")
        try:
            arguments = json.loads(call.arguments or "{}")
        except json.JSONDecodeError as exc:
            return _error(f"the arguments of {call.name} are not valid JSON ({exc}). {self._call_format()}")
        if not isinstance(arguments, dict):
            return _error(f"the arguments of {call.name} must be a JSON object. {self._call_format()}")
        try:
            observation = tool.run(arguments)
        except ToolError as exc:
            return _error(str(exc))
        except (TypeError, ValueError) as exc:
            return _error(f"bad arguments for {call.name}: {exc}. Check the types against the tool's schema")
        except OSError as exc:
            return _error(f"{call.name} failed: {exc.strerror or exc}")
        return observation

    def _call_format(self) -> str:
        return f"Call one of {', '.join(self.tools)} with a JSON object of arguments that matches its schema."

    def close(self) -> None:
        """Release tool resources (the Bash process)."""
        for tool in self.tools.values():
            close = getattr(tool, "close", None)
            if close is not None:
                close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _error(text: str) -> Observation:
    return Observation(text=f"Error: {text}", is_error=True)


def build_toolset(
    root: Path,
    is_editable: EditablePredicate,
    config: ToolsConfig | None = None,
    env: Mapping[str, str] | None = None,
    commands: CommandRunner | None = None,
) -> ToolSet:
    """The paper's seven tools (Bash, Read, Write, Edit, MultiEdit, Glob, Grep) on one workspace.

    Args:
        root: the episode folder; Bash starts there and file tools refuse paths outside it.
        is_editable: predicate on root-relative POSIX paths; Write/Edit/MultiEdit refuse other files.
        config: time limit and output caps; defaults to `ToolsConfig()`.
        env: extra environment variables for the shell (secret-looking names are dropped).
        commands: run Bash's commands as sandbox jobs through this pool or service client (SandboxShell);
            None: in a persistent shell on this machine.

    Example:
        >>> with build_toolset(ws_root, workspace.is_editable) as tools:  # doctest: +SKIP
        ...     result = tools.execute(ToolCall(id="c0", name="Read", arguments='{"path": "model.py"}'))
    """
    config = config or ToolsConfig()
    workspace = Workspace(root, is_editable, config.editable_hint)
    log = ReadLog()
    tools: list[Tool] = [
        BashTool(
            SandboxShell(commands, workspace.root, agent_env(env))
            if commands is not None
            else PersistentShell(workspace.root, agent_env(env)),
            config.bash_timeout_s,
            config.bash_output_cap_bytes,
        ),
        ReadTool(workspace, log),
        WriteTool(workspace, log),
        EditTool(workspace, log),
        MultiEditTool(workspace, log),
        GlobTool(workspace),
        GrepTool(workspace),
    ]
    return ToolSet(tools, config.max_output_chars)
