"""Context budget: how many tokens the conversation uses, and cutting long tool outputs.

Counting uses the backend's tokenizer where it has one (`Model.count_tokens`). Otherwise it
takes the exact count the server reported for the last call (`prompt_tokens + completion_tokens`)
and adds an estimate for the messages appended since. The estimate is characters / 4 (plus a
few tokens per message for the chat template), which is close for English and code under BPE
tokenizers and errs high for dense text; a budget check should therefore keep some reserve.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from cuda_agent.subproc import head_and_tail

PAPER_CONTEXT_TOKENS = 131_072
CHARS_PER_TOKEN = 4
TOKENS_PER_MESSAGE = 4

TokenCounter = Callable[[Sequence[dict[str, Any]]], int | None]
"""Counts the tokens of a message list with a real tokenizer; returns None when it has none."""


def truncate_middle(text: str, max_chars: int) -> tuple[str, bool]:
    """Cut `text` to about `max_chars` (subproc.head_and_tail); returns it and whether anything was cut."""
    text, cut = head_and_tail(text, max_chars, " here to fit the context")
    return text, cut > 0


def estimate_tokens(messages: Sequence[dict[str, Any]]) -> int:
    """Estimate tokens as characters / 4 plus a per-message overhead (see the module docstring)."""
    total = 0
    for message in messages:
        content = message.get("content") or ""
        chars = len(content) if isinstance(content, str) else len(json.dumps(content))
        chars += len(json.dumps(message["tool_calls"])) if message.get("tool_calls") else 0
        total += chars // CHARS_PER_TOKEN + TOKENS_PER_MESSAGE
    return total


class ContextBudget:
    """Tracks the tokens of one episode's conversation against a limit.

    Args:
        max_tokens: the context limit (the paper's 131,072 by default).
        counter: a real tokenizer count (e.g. `model.count_tokens`), or None to estimate.

    Example:
        >>> budget = ContextBudget(counter=model.count_tokens)  # doctest: +SKIP
        >>> budget.observe(messages, turn.prompt_tokens, turn.completion_tokens)  # after each model call
        >>> if budget.exhausted(messages + new_tool_messages, reserve=4096): ...
    """

    def __init__(self, max_tokens: int = PAPER_CONTEXT_TOKENS, counter: TokenCounter | None = None) -> None:
        self.max_tokens = max_tokens
        self.counter = counter
        self._known_messages = 0
        self._known_tokens = 0

    def observe(
        self, messages: Sequence[dict[str, Any]], prompt_tokens: int | None, completion_tokens: int | None
    ) -> None:
        """Record a server's usage: `messages` (the prompt plus the reply just added) cost that many tokens."""
        if prompt_tokens is not None and completion_tokens is not None:
            self._known_messages, self._known_tokens = len(messages), prompt_tokens + completion_tokens

    def count(self, messages: Sequence[dict[str, Any]]) -> int:
        """Tokens of `messages`: the tokenizer's count, else the last reported usage plus an estimate of the rest."""
        if self.counter is not None:
            exact = self.counter(messages)
            if exact is not None:
                return exact
        if 0 < self._known_messages <= len(messages):
            return self._known_tokens + estimate_tokens(messages[self._known_messages :])
        return estimate_tokens(messages)

    def remaining(self, messages: Sequence[dict[str, Any]]) -> int:
        """Tokens left before the limit (negative once past it)."""
        return self.max_tokens - self.count(messages)

    def exhausted(self, messages: Sequence[dict[str, Any]], reserve: int = 0) -> bool:
        """True when fewer than `reserve` tokens are left for the model's next reply."""
        return self.remaining(messages) < reserve
