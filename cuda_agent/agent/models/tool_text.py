"""Tool calls written as text, in the Hermes / Qwen style: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`.

Local models emit their tool calls inside the generated text; this turns that text into
`ToolCall` records. A block that is not valid JSON, or lacks a name, still becomes a `ToolCall`
with `error` set, so the tool set can tell the model what was wrong instead of silently dropping it.
"""

from __future__ import annotations

import json
import re

from cuda_agent.types import ToolCall

_BLOCK = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.DOTALL)
_NAME = re.compile(r'"name"\s*:\s*"([^"]+)"')
FORMAT_HINT = 'Write each call as <tool_call>{"name": "Read", "arguments": {"path": "model.py"}}</tool_call>.'


def parse_tool_calls(text: str, first_id: int = 0) -> tuple[str, list[ToolCall]]:
    """Split generated text into its prose and its tool calls.

    Args:
        text: decoded model output (special tokens kept, end-of-turn token removed).
        first_id: number of the first call; ids are 'call_<n>' so they stay unique across an episode.

    Returns:
        The text outside the tool-call blocks (stripped) and the calls in order.
    """
    calls: list[ToolCall] = []
    for number, match in enumerate(_BLOCK.finditer(text), start=first_id):
        calls.append(_parse_block(match.group(1).strip(), f"call_{number}", closed=bool(match.group(2))))
    return _BLOCK.sub("", text).strip(), calls


def _parse_block(body: str, call_id: str, closed: bool) -> ToolCall:
    name_match = _NAME.search(body)
    name = name_match.group(1) if name_match else ""
    if not closed:
        return ToolCall(
            id=call_id, name=name, arguments=body, error=f"the call was not closed with </tool_call>. {FORMAT_HINT}"
        )
    try:
        payload = json.loads(body)
    except json.JSONDecodeError as exc:
        return ToolCall(
            id=call_id, name=name, arguments=body, error=f"its body is not valid JSON ({exc}). {FORMAT_HINT}"
        )
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        return ToolCall(id=call_id, name=name, arguments=body, error=f"it has no string 'name'. {FORMAT_HINT}")
    arguments = payload.get("arguments", payload.get("parameters", {}))
    return ToolCall(
        id=call_id, name=payload["name"], arguments=arguments if isinstance(arguments, str) else json.dumps(arguments)
    )
