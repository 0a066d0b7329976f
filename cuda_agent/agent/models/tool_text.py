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
# ChatML with tool calls in exactly the form `parse_tool_calls` reads (Qwen2.5's layout, cut down): for
# tokenizers made locally, as tests and benchmarks make them, which carry no chat template of their own.
CHATML_TOOLS_TEMPLATE = """{%- if tools %}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}

{% endif %}# Tools
<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools>
Call a tool as <tool_call>{"name": <name>, "arguments": <args>}</tool_call><|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for m in messages %}{% if m.role == 'system' %}{% elif m.role == 'tool' %}<|im_start|>user
<tool_response>
{{ m.content }}
</tool_response><|im_end|>
{% else %}<|im_start|>{{ m.role }}
{{ m.content }}{% for c in m.tool_calls or [] %}
<tool_call>
{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}
</tool_call>{% endfor %}<|im_end|>
{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""
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
