"""Replay: a model that returns recorded (or scripted) assistant turns in order.

Used by `cuda-agent demo` (a bundled recorded episode, no model needed) and by tests, where it
plays the part of mini-swe-agent's DeterministicModel. Before answering, it checks that the
conversation it is given follows the recording: the same assistant turns so far, and every
recorded tool call answered. By default it also checks that each tool result failed or succeeded
as recorded ('Error: ...' results, see `ToolSet`), since an edit that now fails means the
replay no longer matches the workspace; `strict=True` compares the tool outputs word for word.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cuda_agent.agent.models.base import Message, ModelTurn, ToolSchema
from cuda_agent.agent.trajectory import read_trajectory
from cuda_agent.errors import ModelError
from cuda_agent.types import Turn


class ReplayModel:
    """Returns `turns` one per call.

    Args:
        turns: the assistant turns to play, in order.
        recorded_outputs: per turn, the tool outputs the recording got (to detect divergence); optional.
        name: shown in trajectories.
        strict: compare tool outputs exactly instead of only their error status.
        recorded_task: the task the turns were recorded on (a trajectory's header), None if unknown.
    """

    def __init__(
        self,
        turns: Sequence[ModelTurn],
        recorded_outputs: Sequence[Sequence[str]] | None = None,
        name: str = "replay",
        strict: bool = False,
        recorded_task: str | None = None,
    ) -> None:
        self.turns = list(turns)
        self.recorded_outputs = [list(o) for o in recorded_outputs] if recorded_outputs is not None else None
        self.name, self.strict = name, strict
        self.recorded_task = recorded_task
        self.played = 0

    @classmethod
    def from_file(cls, path: Path, strict: bool = False) -> ReplayModel:
        """Replay the assistant turns of a trajectory JSONL file."""
        trajectory = read_trajectory(path)
        if not trajectory.turns:
            raise ModelError(f"{path} holds no turns to replay")
        turns = [_model_turn(turn) for turn in trajectory.turns]
        outputs = [[r.output for r in turn.tool_results] for turn in trajectory.turns]
        return cls(turns, outputs, name=f"replay:{path}", strict=strict, recorded_task=trajectory.task)

    def mismatch(self, task_ref: str) -> str:
        """A warning line where these turns were recorded on another task than `task_ref` (they rarely fit it: the
        replay then stops where the conversation leaves the recording), else empty."""
        if self.recorded_task is None or self.recorded_task == task_ref:
            return ""
        return f"warning: {self.name} was recorded on {self.recorded_task}, not {task_ref}; its turns may not fit"

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> ModelTurn:
        """The next recorded turn, after checking the conversation still follows the recording."""
        self._check_history(messages)
        if self.played >= len(self.turns):
            raise ModelError(
                f"the replay ran out: it holds {len(self.turns)} turns and the episode asked for turn "
                f"{self.played + 1}; run with a turn limit of {len(self.turns)} or use a live model"
            )
        turn = self.turns[self.played]
        self.played += 1
        return turn

    def count_tokens(self, messages: Sequence[Message], tools: Sequence[ToolSchema] | None = None) -> int | None:
        return None

    def _check_history(self, messages: Sequence[Message]) -> None:
        assistant = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
        if len(assistant) != self.played:
            raise ModelError(
                f"the replay diverged: the conversation holds {len(assistant)} assistant turns but the replay has "
                f"played {self.played}; pass the conversation with every returned turn appended"
            )
        if not self.played:
            return
        previous = self.turns[self.played - 1]
        answers = {m.get("tool_call_id"): m.get("content") or "" for m in messages[assistant[-1] + 1 :]}
        for number, call in enumerate(previous.tool_calls):
            if call.id not in answers:
                raise ModelError(
                    f"the replay diverged: turn {self.played} called {call.name} ({call.id}) and got no answer"
                )
            if self.recorded_outputs is not None and number < len(self.recorded_outputs[self.played - 1]):
                self._compare(call.name, answers[call.id], self.recorded_outputs[self.played - 1][number])

    def _compare(self, tool: str, got: str, recorded: str) -> None:
        if self.strict and got != recorded:
            raise ModelError(
                f"the replay diverged at turn {self.played}: {tool} returned\n{got[:500]}\nbut the recording has\n"
                f"{recorded[:500]}"
            )
        if got.startswith("Error:") != recorded.startswith("Error:"):
            raise ModelError(
                f"the replay diverged at turn {self.played}: {tool} "
                f"{'failed' if got.startswith('Error:') else 'succeeded'} now but "
                f"{'failed' if recorded.startswith('Error:') else 'succeeded'} in the recording: {got[:500]}"
            )


def _model_turn(turn: Turn) -> ModelTurn:
    return ModelTurn(
        content=turn.content,
        tool_calls=turn.tool_calls,
        finish_reason=turn.finish_reason,
        prompt_tokens=turn.prompt_tokens,
        completion_tokens=turn.completion_tokens,
        token_ids=turn.token_ids,
        logprobs=turn.logprobs,
    )
