"""A `Model` over verl's token-level rollout server that keeps the whole episode as token ids.

Why token ids: PPO needs the log-probabilities of exactly the tokens the policy sampled. Rendering
the conversation to text and tokenising it again each turn can split the model's own tokens
differently (BPE is not unique), so the trainer would score tokens that were never sampled.
Here the history is never re-tokenised:

- the first prompt (system + task) is rendered once with the chat template;
- each reply's generated ids are appended as they came (mask 1, their log-probs kept);
- only the new messages after a reply (tool results, nudges) are tokenised, alone, and appended
  (mask 0), the way verl's Continuous Token builders do it (their model-specific boundary fixes,
  such as Qwen's newline after `<|im_end|>`, are applied through the same builder).

Threading design: our episode loop (`run_episode`) is synchronous and runs tools that block for
seconds (builds, the judge), while verl's `AgentLoopBase.run` is a coroutine on verl's event loop.
The episode therefore runs in a worker thread, and `complete()` hands verl's `generate` coroutine
to that event loop with `asyncio.run_coroutine_threadsafe` and waits for it. The event loop stays
free for other episodes while this one builds or judges. Calling `complete()` from the event
loop's own thread would deadlock, so it is refused with a ModelError.

verl itself is not imported here: the server client and the token builder are passed in, and only
their methods are used (`generate`; `build_initial_tokens`, `merge_context_tokens`,
`merge_assistant_tokens`, `align_response_metadata`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any, Protocol

from cuda_agent.agent.models.base import Message, ModelTurn, ToolSchema
from cuda_agent.agent.models.tool_text import parse_tool_calls
from cuda_agent.agent.models.transformers_local import template_messages
from cuda_agent.errors import ContextLengthError, ModelError


class TokenServer(Protocol):
    """verl's `LLMServerClient` as this backend uses it."""

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any]) -> Any:
        """Returns an object with `token_ids: list[int]` and `log_probs: list[float] | None`."""
        ...


class TokenBuilder(Protocol):
    """verl's `ContinuousTokenBuilder` as this backend uses it."""

    tokenizer: Any

    def build_initial_tokens(self, messages: list[Message], *, tools: list[ToolSchema] | None = None) -> list[int]: ...

    def merge_context_tokens(
        self, previous: list[Message], updated: list[Message], runtime_ids: list[int], *, tools: Any = None
    ) -> Any: ...

    def merge_assistant_tokens(self, runtime_ids: list[int], assistant_ids: list[int]) -> Any: ...

    def align_response_metadata(
        self, merge: Any, mask: list[int], logprobs: list[float] | None, *, assistant_logprobs: Any = None
    ) -> tuple[list[int], list[float] | None]: ...


class VerlTokenModel:
    """Our `Model` protocol on verl's token server; accumulates the episode's token record.

    Args:
        server: verl's server manager (`AgentLoopBase.server_manager`).
        builder: verl's Continuous Token builder for the tokenizer (`AgentLoopBase.continuous_token_builder`).
        loop: the event loop `server.generate` must run on (the one running `AgentLoopBase.run`).
        sampling_params: verl's sampling parameters for this rollout (temperature, top_p, ...).
        response_length: most response tokens (model and tool) of the episode; rollout.response_length.
        stop_token_ids: ids that end a reply (removed before parsing); the tokenizer's EOS when None.
        request_id: sticky-session id for the server's prefix cache; a fresh one when None.
        timeout_s: longest wait for one generation.
        max_model_len: the server's context (rollout.max_model_len): prompt and response together never pass it.
            Our first prompt is not the data row's, so it can be longer than data.max_prompt_length; without this
            cap the server would refuse the next call past its context, and the episode would be lost as our
            failure instead of ending as clipped. None: only `response_length` bounds the episode.

    Attributes:
        prompt_ids: the rendered first prompt.
        response_ids: everything after it: generated ids and tool-message ids.
        response_mask: 1 on generated ids, 0 on tool-message and boundary ids (same length as response_ids).
        response_logprobs: the server's log-prob per generated id, 0.0 elsewhere; None if the server gave none.
    """

    def __init__(
        self,
        server: TokenServer,
        builder: TokenBuilder,
        loop: asyncio.AbstractEventLoop,
        sampling_params: dict[str, Any],
        response_length: int,
        stop_token_ids: Sequence[int] | None = None,
        request_id: str | None = None,
        timeout_s: float = 3600.0,
        max_model_len: int | None = None,
    ) -> None:
        self.server, self.builder, self.loop = server, builder, loop
        self.sampling_params = dict(sampling_params)
        self.response_length = response_length
        eos = builder.tokenizer.eos_token_id
        self.stop_token_ids = set(stop_token_ids if stop_token_ids is not None else [] if eos is None else [eos])
        self.request_id = request_id or uuid.uuid4().hex
        self.timeout_s = timeout_s
        self.max_model_len = max_model_len
        self.name = f"verl:{type(server).__name__}"
        self.prompt_ids: list[int] = []
        self._runtime: list[int] = []  # prompt_ids + response_ids, the sequence the server continues
        self.response_mask: list[int] = []
        self.response_logprobs: list[float] | None = []
        self._seen: list[Message] = []  # messages already in the token stream (templated form)
        self._pending: tuple[tuple[int, int], Any] | None = (
            None  # ((messages, stream) lengths, merge) from count_tokens
        )
        self._calls = 0
        self.generations = 0

    @property
    def response_ids(self) -> list[int]:
        return self._runtime[len(self.prompt_ids) :]

    def count_tokens(self, messages: Sequence[Message], tools: Sequence[ToolSchema] | None = None) -> int | None:
        """Exact length of the token stream once `messages` are appended (prompt + response)."""
        if not self.prompt_ids:
            return len(self.builder.build_initial_tokens(template_messages(messages), tools=_tools(tools)))
        merge = self._merge_context(messages, tools)
        return len(merge.token_ids) if merge is not None else len(self._runtime)

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> ModelTurn:
        """Generate the next reply on verl's server; see `Model.complete`.

        Raises:
            ContextLengthError: the response budget (rollout.response_length) is spent, or the server's context
                (`max_model_len`) has no room for one more token: the episode ends as clipped.
            ModelError: the history was edited (this backend is append-only), the server failed,
                or this was called on the event loop's own thread.
        """
        self._append_context(messages, tools)
        room = self.response_length - len(self.response_mask)
        if room <= 0:
            raise ContextLengthError(f"the response budget of {self.response_length} tokens is spent")
        if self.max_model_len is not None:
            room = min(room, self.max_model_len - len(self._runtime))
            if room <= 0:
                raise ContextLengthError(f"the model's context of {self.max_model_len} tokens is full")
        params = dict(self.sampling_params)
        params["max_tokens"] = min(int(params.get("max_tokens") or room), room)
        output = self._generate(params)
        token_ids = list(output.token_ids)
        logprobs = list(output.log_probs) if output.log_probs is not None else None
        merge = self.builder.merge_assistant_tokens(self._runtime, token_ids)
        self.response_mask, self.response_logprobs = self.builder.align_response_metadata(
            merge,
            self.response_mask,
            self.response_logprobs if logprobs is not None else None,
            assistant_logprobs=logprobs,
        )
        self._runtime = list(merge.token_ids)
        self.generations += 1
        return self._decode(token_ids, logprobs, prompt_tokens=len(self._runtime) - len(token_ids))

    def _append_context(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> None:
        """Tokenise only what was appended since the last reply (or the first prompt, once)."""
        if not self.prompt_ids:
            self._seen = template_messages(messages)
            self.prompt_ids = list(self.builder.build_initial_tokens(self._seen, tools=_tools(tools)))
            self._runtime = list(self.prompt_ids)
            return
        merge = self._merge_context(messages, tools)
        if merge is not None:
            self.response_mask, self.response_logprobs = self.builder.align_response_metadata(
                merge, self.response_mask, self.response_logprobs
            )
            self._runtime = list(merge.token_ids)
        self._seen = template_messages(messages)
        self._pending = None

    def _merge_context(self, messages: Sequence[Message], tools: Sequence[ToolSchema] | None) -> Any:
        # The message right after the seen ones is our own reply: its ids are in the stream already.
        known, key = len(self._seen) + 1, (len(messages), len(self._runtime))
        if self._pending is not None and self._pending[0] == key:
            return self._pending[1]
        updated = template_messages(messages)
        if updated[: len(self._seen)] != self._seen or len(updated) < known:
            raise ModelError("the conversation was edited, not appended to; the verl backend needs append-only history")
        if len(updated) == known:
            return None
        merge = self.builder.merge_context_tokens(updated[:known], updated, self._runtime, tools=_tools(tools))
        self._pending = (key, merge)
        return merge

    def _generate(self, params: dict[str, Any]) -> Any:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            raise ModelError(
                "VerlTokenModel.complete() was called on the event loop's thread; run the episode in a worker thread"
            )
        coroutine = self.server.generate(self.request_id, prompt_ids=list(self._runtime), sampling_params=params)
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout=self.timeout_s)
        except TimeoutError as exc:
            future.cancel()
            raise ModelError(
                f"verl's server gave no reply in {self.timeout_s:.0f} s; check the rollout replicas"
            ) from exc
        except Exception as exc:  # the server's own errors: the episode cannot go on without a reply
            raise ModelError(f"verl's server failed to generate: {exc!r}") from exc

    def _decode(self, token_ids: list[int], logprobs: list[float] | None, prompt_tokens: int) -> ModelTurn:
        stopped = bool(token_ids) and token_ids[-1] in self.stop_token_ids
        text = self.builder.tokenizer.decode(token_ids[:-1] if stopped else token_ids, skip_special_tokens=False)
        content, calls = parse_tool_calls(text, first_id=self._calls)
        self._calls += len(calls)
        return ModelTurn(
            content=content,
            tool_calls=calls,
            finish_reason=("tool_calls" if calls else "stop") if stopped else "length",
            prompt_tokens=prompt_tokens,
            completion_tokens=len(token_ids),
            token_ids=token_ids,
            logprobs=logprobs,
        )


def _tools(tools: Sequence[ToolSchema] | None) -> list[ToolSchema] | None:
    return list(tools) if tools else None
