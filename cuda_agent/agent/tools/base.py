"""What every tool shares: the `Observation` it returns, the `Tool` protocol, and path confinement.

A tool acts on one workspace root. Paths the model gives are resolved against that root and
refused when they leave it (`..`, absolute paths elsewhere, symlinks pointing out). This keeps
honest mistakes inside the episode folder; it is not a security boundary against a process that
the model starts through Bash (see `bash.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

EditablePredicate = Callable[[str], bool]
"""Takes a POSIX path relative to the workspace root; True if the model may change that file."""


DEFAULT_EDITABLE_HINT = (
    "You may create and change only model_new.py and source files under kernels/ (.cu, .cuh, .cpp, .h, .hpp)."
)


class Observation(BaseModel):
    """What a tool call gives back to the model."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str = Field(description="Text for the model.")
    is_error: bool = Field(default=False, description="The call failed; `text` says why and what is allowed.")
    truncated: bool = Field(default=False, description="`text` was cut to fit an output cap.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Facts for readers, e.g. 'diff', 'exit_code'.")


class ToolError(Exception):
    """An agent mistake inside a tool (bad path, refused edit); the tool set turns it into an error Observation."""


class Tool(Protocol):
    """A tool the model can call by name with JSON arguments."""

    name: str

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-calling schema: {"type": "function", "function": {name, description, parameters}}."""
        ...

    def run(self, arguments: dict[str, Any]) -> Observation:
        """Run with already-parsed arguments. May raise ToolError for the model's mistakes."""
        ...


def function_schema(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """Build an OpenAI-style function schema."""
    parameters = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


class Workspace:
    """Path confinement and edit permission for one workspace root, shared by the file tools.

    Args:
        root: the episode folder.
        is_editable: predicate on root-relative POSIX paths; files it rejects are read-only.
        editable_hint: words telling the model which files it may change, used in refusals.
    """

    def __init__(self, root: Path, is_editable: EditablePredicate, editable_hint: str = DEFAULT_EDITABLE_HINT) -> None:
        self.root = Path(root).resolve()
        self.is_editable = is_editable
        self.editable_hint = editable_hint

    def resolve(self, path: str) -> Path:
        """Resolve a model-given path (relative to the root, or absolute inside it); refuse anything outside.

        Raises:
            ToolError: the path is empty or leads outside the workspace (also through a symlink).
        """
        if not isinstance(path, str) or not path.strip():
            raise ToolError("a path is required, e.g. 'kernels/my_kernel.cu' (relative to the workspace root)")
        candidate = Path(path)
        if not candidate.is_absolute():
            candidate = self.root / candidate
        resolved = candidate.resolve()
        if resolved != self.root and self.root not in resolved.parents:
            raise ToolError(
                f"'{path}' is outside the workspace; use paths relative to the workspace root "
                f"(the folder Bash starts in), e.g. 'model_new.py' or 'kernels/my_kernel.cu'"
            )
        return resolved

    def relative(self, path: Path) -> str:
        """Root-relative POSIX path of a resolved path inside the root ('.' for the root itself)."""
        return path.relative_to(self.root).as_posix() or "."

    def check_editable(self, path: Path) -> None:
        """Raise ToolError with the allowed files when the model may not change `path`."""
        relative = self.relative(path)
        if not self.is_editable(relative):
            raise ToolError(f"'{relative}' is read-only: it is a protected file of the workspace. {self.editable_hint}")
