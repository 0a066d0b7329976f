"""A model behind any OpenAI-compatible chat-completions server (vLLM, SGLang, hosted APIs), over httpx.

The base URL, model name and API key come from the arguments, else from OPENAI_BASE_URL,
CUDA_AGENT_MODEL and OPENAI_API_KEY; with no model name the server's first listed model is used
(vLLM and SGLang serve one). 429 and 5xx answers and connection failures are retried with
exponential backoff (honouring Retry-After); other errors raise `ModelError` with what to fix.

Token ids and log-probabilities: with `logprobs=True` the request asks for per-token
log-probabilities; with `token_ids=True` it also sends vLLM's `return_token_ids` (ids arrive in
`choices[0].token_ids`); a server that spells tokens as 'token_id:N' (vLLM's
`return_tokens_as_token_ids`, passed through `extra_body`) is understood too.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx

from cuda_agent.agent.models.base import Message, ModelTurn, ToolSchema
from cuda_agent.agent.models.tool_text import parse_tool_calls
from cuda_agent.errors import ContextLengthError, ModelError
from cuda_agent.types import ToolCall

logger = logging.getLogger(__name__)
_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


def normalize_base_url(url: str) -> str:
    """'http://host:8000' -> 'http://host:8000/v1'; a URL with a path is kept as given (minus a trailing '/')."""
    url = url.rstrip("/")
    return url + "/v1" if urlsplit(url).path in ("", "/") else url


class OpenAIModel:
    """Chat completions with tool calls over HTTP.

    Args:
        base_url: server URL, e.g. 'http://localhost:8000/v1' (env OPENAI_BASE_URL).
        model: model name (env CUDA_AGENT_MODEL; else the server's first model).
        api_key: bearer token (env OPENAI_API_KEY; servers without auth ignore it).
        temperature, top_p, max_tokens: sampling parameters; None leaves the server's default.
        logprobs: ask for per-token log-probabilities.
        token_ids: ask for generated token ids (vLLM `return_token_ids`).
        extra_body: more request fields, e.g. {"top_k": 20} or {"chat_template_kwargs": {...}}.
        timeout_s: per-request time limit. max_retries, backoff_s: retry policy for 429/5xx.
        parse_text_tool_calls: read `<tool_call>` blocks from the text when the server returned none
            (a server started without a tool-call parser).
    """

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        *,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        logprobs: bool = False,
        token_ids: bool = False,
        extra_body: dict[str, Any] | None = None,
        timeout_s: float = 600.0,
        max_retries: int = 5,
        backoff_s: float = 1.0,
        parse_text_tool_calls: bool = True,
    ) -> None:
        base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        if not base_url:
            raise ModelError("no server URL: pass an http(s) URL as the model spec or set OPENAI_BASE_URL")
        self.base_url = normalize_base_url(base_url)
        self.sampling = {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens}
        self.logprobs, self.token_ids, self.extra_body = logprobs, token_ids, dict(extra_body or {})
        self.max_retries, self.backoff_s = max_retries, backoff_s
        self.parse_text_tool_calls = parse_text_tool_calls
        key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self._client = httpx.Client(timeout=timeout_s, headers={"Authorization": f"Bearer {key}"})
        self.model = model or os.environ.get("CUDA_AGENT_MODEL") or self._first_served_model()
        self.name = f"{self.base_url} {self.model}"
        self._calls = 0

    def _first_served_model(self) -> str:
        data = self._request("GET", "/models")
        models = [m.get("id") for m in data.get("data", []) if isinstance(m, dict)]
        if not models or not isinstance(models[0], str):
            raise ModelError(f"{self.base_url}/models lists no model; pass a model name or set CUDA_AGENT_MODEL")
        return models[0]

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> ModelTurn:
        """One chat-completions call; see `Model.complete`."""
        body: dict[str, Any] = {"model": self.model, "messages": sendable_messages(messages)}
        if tools:
            body["tools"] = list(tools)
        body.update({k: v for k, v in self.sampling.items() if v is not None})
        if self.logprobs:
            body["logprobs"] = True
        if self.token_ids:
            body["return_token_ids"] = True
        body.update(self.extra_body)
        return self._parse(self._request("POST", "/chat/completions", body))

    def count_tokens(self, messages: Sequence[Message], tools: Sequence[ToolSchema] | None = None) -> int | None:
        """None: this backend has no local tokenizer; the context budget uses the server's reported usage."""
        return None

    def close(self) -> None:
        self._client.close()

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        url = self.base_url + path
        for attempt in range(self.max_retries + 1):
            delay = self.backoff_s * 2**attempt
            try:
                response = self._client.request(method, url, json=body)
            except httpx.TransportError as exc:
                problem = f"could not reach {url}: {exc!r}"
            else:
                if response.status_code < 400:
                    return _json(response, url)
                problem = f"{url} answered {response.status_code}: {response.text[:1000]}"
                if response.status_code not in _RETRY_STATUS:
                    raise _http_error(response, url)
                delay = max(delay, _retry_after_s(response))
            if attempt < self.max_retries:
                logger.warning("%s; retrying in %.1f s", problem, delay)
                time.sleep(delay)
        raise ModelError(f"{problem} (gave up after {self.max_retries + 1} tries); check that the server is up")

    def _parse(self, data: dict[str, Any]) -> ModelTurn:
        try:
            choice = data["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError) as exc:
            raise ModelError(f"{self.base_url} returned no choices[0].message: {json.dumps(data)[:500]}") from exc
        content = message.get("content") or ""
        calls = [self._tool_call(raw, n) for n, raw in enumerate(message.get("tool_calls") or [])]
        if not calls and self.parse_text_tool_calls and "<tool_call>" in content:
            content, calls = parse_tool_calls(content, first_id=self._calls)
        self._calls += len(calls)
        usage = data.get("usage") or {}
        token_ids, logprobs = _tokens(choice)
        return ModelTurn(
            content=content,
            tool_calls=calls,
            finish_reason=choice.get("finish_reason"),
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            token_ids=token_ids,
            logprobs=logprobs,
        )

    def _tool_call(self, raw: Any, number: int) -> ToolCall:
        call_id = raw.get("id") if isinstance(raw, dict) and raw.get("id") else f"call_{self._calls + number}"
        function = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            return ToolCall(id=call_id, name="", arguments=json.dumps(raw), error="the call has no function name")
        arguments = function.get("arguments", "{}")
        return ToolCall(
            id=call_id,
            name=function["name"],
            arguments=arguments if isinstance(arguments, str) else json.dumps(arguments),
        )


def sendable_messages(messages: Sequence[Message]) -> list[Message]:
    """Messages with malformed tool-call arguments wrapped as {"invalid_json": text}.

    Servers such as vLLM parse the arguments of earlier tool calls to render the chat template and
    answer 400 to invalid JSON, which would end the episode on the model's first malformed call;
    the wrapped text still shows the model what it wrote.
    """
    result = []
    for message in messages:
        calls = message.get("tool_calls")
        if calls:
            message = {**message, "tool_calls": [_sendable_call(call) for call in calls]}
        result.append(message)
    return result


def _sendable_call(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    arguments = function.get("arguments")
    try:
        if isinstance(json.loads(arguments), dict):
            return call
    except (TypeError, json.JSONDecodeError):
        pass
    return {**call, "function": {**function, "arguments": json.dumps({"invalid_json": arguments})}}


def _json(response: httpx.Response, url: str) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError as exc:
        raise ModelError(f"{url} did not answer with JSON: {response.text[:500]!r}") from exc
    if not isinstance(data, dict):
        raise ModelError(f"{url} answered {type(data).__name__}, not a JSON object")
    return data


def _http_error(response: httpx.Response, url: str) -> ModelError:
    text = response.text[:1000]
    status = response.status_code
    lowered = text.lower()
    if status == 400 and "context" in lowered and ("length" in lowered or "maximum" in lowered):
        return ContextLengthError(f"{url}: the conversation is longer than the model's context: {text}")
    hints = {
        401: "check OPENAI_API_KEY (or the api_key argument)",
        403: "check OPENAI_API_KEY and that it may use this model",
        404: "check the base URL (it usually ends in /v1) and the model name (CUDA_AGENT_MODEL)",
    }
    hint = hints.get(status, "the request was refused; the server's message above says why")
    return ModelError(f"{url} answered {status}: {text}; {hint}")


def _retry_after_s(response: httpx.Response) -> float:
    try:
        return min(float(response.headers.get("retry-after", 0)), 60.0)
    except ValueError:
        return 0.0


def _tokens(choice: dict[str, Any]) -> tuple[list[int] | None, list[float] | None]:
    entries = (choice.get("logprobs") or {}).get("content") or []
    logprobs = [float(e["logprob"]) for e in entries] or None
    token_ids = choice.get("token_ids")
    if token_ids is None and entries and all(str(e.get("token", "")).startswith("token_id:") for e in entries):
        token_ids = [int(e["token"].split(":", 1)[1]) for e in entries]
    return token_ids, logprobs
