"""A local Hugging Face transformers model: chat template with tools, sampling, token ids and log-probabilities.

The model and tokenizer load from a local folder (`hf:PATH`); nothing is downloaded unless PATH
is a hub name and the machine can reach the hub. Tool calls are parsed from the generated text in
the Hermes / Qwen style (`tool_text.py`). `transformers` is imported only when this backend is
built, so `import cuda_agent` stays light.

Log-probabilities are those of the model's unmodified distribution (temperature 1, no top-p or
top-k), as vLLM reports them by default; the tokens themselves are sampled with the configured
parameters.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cuda_agent.agent.models.base import Message, ModelTurn, ToolSchema
from cuda_agent.agent.models.gguf import chat_template_for_tools
from cuda_agent.agent.models.tool_text import parse_tool_calls
from cuda_agent.errors import ModelError


def template_messages(messages: Sequence[Message]) -> list[Message]:
    """Messages as chat templates expect them: tool-call arguments as dicts rather than JSON text."""
    result = []
    for message in messages:
        if message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                function = dict(call.get("function", {}))
                try:
                    function["arguments"] = json.loads(function.get("arguments") or "{}")
                except (json.JSONDecodeError, TypeError):
                    pass  # malformed arguments stay text, as the model wrote them
                calls.append({**call, "function": function})
            message = {**message, "tool_calls": calls}
        result.append(message)
    return result


class TransformersModel:
    """A causal LM run in this process with `generate`.

    Args:
        path: local folder (or hub name) with the model, its tokenizer and a chat template.
        device: 'cpu', 'cuda', 'cuda:1', ...; 'auto' picks cuda when available.
        dtype: torch dtype name or 'auto' (the checkpoint's).
        temperature: 0 means greedy decoding.
        top_p, top_k: nucleus and top-k sampling (1.0 and 0 switch them off).
        max_new_tokens: most tokens generated per turn.
        seed: seeds torch's generator once, for repeatable sampling.
        chat_template_kwargs: passed to the template, e.g. {"enable_thinking": False} for Qwen3.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        device: str = "auto",
        dtype: str = "auto",
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        max_new_tokens: int = 4096,
        seed: int | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
    ) -> None:
        import torch
        import transformers

        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(str(path))
            self.model = transformers.AutoModelForCausalLM.from_pretrained(
                str(path), dtype=dtype if dtype == "auto" else getattr(torch, dtype)
            )
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot load a transformers model from {path}: {exc}") from exc
        if not self.tokenizer.chat_template:
            raise ModelError(f"the tokenizer in {path} has no chat_template; add one to tokenizer_config.json")
        chat_template_for_tools(self.tokenizer)  # SmolLM2's own template drops tools and tool calls (gguf.py)
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.model.to(device).eval()
        self.device = device
        self.name = f"hf:{path}"
        self.sampling = {"temperature": temperature, "top_p": top_p, "top_k": top_k}
        self.max_new_tokens = max_new_tokens
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self._calls = 0
        if seed is not None:
            torch.manual_seed(seed)

    def render(self, messages: Sequence[Message], tools: Sequence[ToolSchema] | None) -> str:
        """The prompt text for the next assistant turn."""
        return self.tokenizer.apply_chat_template(
            template_messages(messages),
            tools=list(tools) if tools else None,
            add_generation_prompt=True,
            tokenize=False,
            **self.chat_template_kwargs,
        )

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def count_tokens(self, messages: Sequence[Message], tools: Sequence[ToolSchema] | None = None) -> int | None:
        """Tokens of the rendered prompt, tools included."""
        return len(self.encode(self.render(messages, tools)))

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> ModelTurn:
        """Sample one assistant turn; see `Model.complete`."""
        import torch

        prompt_ids = self.encode(self.render(messages, tools))
        input_ids = torch.tensor([prompt_ids], device=self.device)
        greedy = self.sampling["temperature"] <= 0
        options: dict[str, Any] = {"do_sample": not greedy}
        if not greedy:
            options.update(self.sampling)
        with torch.no_grad():
            out = self.model.generate(
                input_ids,
                attention_mask=torch.ones_like(input_ids),
                max_new_tokens=self.max_new_tokens,
                return_dict_in_generate=True,
                output_logits=True,
                pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
                **options,
            )
        generated = out.sequences[0, len(prompt_ids) :]
        logits = torch.stack(out.logits, dim=0)[: len(generated), 0, :].float()
        logprobs = torch.log_softmax(logits, dim=-1).gather(1, generated[:, None]).squeeze(1)
        return self.decode(prompt_ids, generated.tolist(), logprobs.tolist())

    def decode(self, prompt_ids: list[int], token_ids: list[int], logprobs: list[float] | None) -> ModelTurn:
        """Turn generated ids into a ModelTurn: text, parsed tool calls, finish reason."""
        stops = set(_as_list(self.model.generation_config.eos_token_id)) | {self.tokenizer.eos_token_id}
        stopped = bool(token_ids) and token_ids[-1] in stops
        text = self.tokenizer.decode(token_ids[:-1] if stopped else token_ids, skip_special_tokens=False)
        content, calls = parse_tool_calls(text, first_id=self._calls)
        self._calls += len(calls)
        finish = ("tool_calls" if calls else "stop") if stopped else "length"
        return ModelTurn(
            content=content,
            tool_calls=calls,
            finish_reason=finish,
            prompt_tokens=len(prompt_ids),
            completion_tokens=len(token_ids),
            token_ids=token_ids,
            logprobs=logprobs,
        )


def _as_list(value: int | list[int] | None) -> list[int]:
    if value is None:
        return []
    return [value] if isinstance(value, int) else list(value)
