"""The model interface every backend meets: `complete(messages, tools) -> ModelTurn`.

Messages and tools are OpenAI chat-completions shaped dicts (`{"role": ..., "content": ...}`,
assistant `tool_calls`, `tool` messages with `tool_call_id`; tools as
`{"type": "function", "function": {...}}`), because every server we target speaks that format
and chat templates of open models accept it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.types import ToolCall, ToolResult, Turn, Verdict

Message = dict[str, Any]
ToolSchema = dict[str, Any]


class ModelTurn(BaseModel):
    """One assistant reply from a backend."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    content: str = Field(default="", description="Assistant text, with any parsed tool-call blocks removed.")
    tool_calls: list[ToolCall] = Field(default_factory=list, description="Tool calls, in order (may carry `error`).")
    finish_reason: str | None = Field(default=None, description="'stop', 'tool_calls', 'length', ... as reported.")
    prompt_tokens: int | None = Field(default=None, description="Tokens of the prompt, if the backend counted them.")
    completion_tokens: int | None = Field(default=None, description="Tokens generated, if the backend counted them.")
    token_ids: list[int] | None = Field(default=None, description="Generated token ids, where the backend gives them.")
    logprobs: list[float] | None = Field(default=None, description="Log-probability of each generated token.")

    def message(self) -> Message:
        """The OpenAI-style assistant message to append to the conversation."""
        return Turn(index=0, content=self.content, tool_calls=self.tool_calls).messages()[0]

    def to_turn(
        self,
        index: int,
        tool_results: Sequence[ToolResult] = (),
        model_s: float = 0.0,
        tools_s: float = 0.0,
        extra_messages: Sequence[Message] = (),
        verdicts: Sequence[Verdict] = (),
    ) -> Turn:
        """The trajectory record of this reply and what the loop did with it."""
        return Turn(
            index=index,
            tool_results=list(tool_results),
            extra_messages=list(extra_messages),
            model_s=model_s,
            tools_s=tools_s,
            verdicts=list(verdicts),
            **self.model_dump(),
        )


class Model(Protocol):
    """A chat model that can call tools."""

    name: str
    """A short description for trajectories and logs, e.g. 'http://localhost:8000/v1 Qwen3-8B'."""

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> ModelTurn:
        """Generate the next assistant turn.

        Raises:
            ModelError: the backend failed (server unreachable after retries, bad answer, replay diverged).
            ContextLengthError: the conversation no longer fits the model's context.
        """
        ...

    def count_tokens(self, messages: Sequence[Message], tools: Sequence[ToolSchema] | None = None) -> int | None:
        """Tokens of the rendered prompt with the backend's tokenizer, or None when it has none."""
        ...
