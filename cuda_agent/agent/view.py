"""An episode as one self-contained HTML page: prompt, turns, tool calls, kernel diffs, verdicts.

Run: `cuda-agent view TRAJ.jsonl -o FILE.html`. The page has no scripts and loads nothing from
outside; every string from the trajectory is HTML-escaped, since model output is untrusted.
"""

from __future__ import annotations

import difflib
import json
from html import escape
from pathlib import Path
from typing import Any

from cuda_agent.agent.trajectory import read_trajectory
from cuda_agent.types import ToolCall, ToolResult, Trajectory, Turn

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:1em;color:#222;background:#fafafa}
h1{font-size:1.4em} h2{font-size:1.1em;margin:0 0 .4em}
pre{white-space:pre-wrap;word-break:break-word;background:#fff;border:1px solid #ddd;padding:.5em;margin:.3em 0;
 max-height:40em;overflow:auto;font:12px/1.35 ui-monospace,monospace}
.turn{background:#fff;border:1px solid #ccc;border-radius:6px;padding:.8em;margin:1em 0}
.call{border-left:3px solid #4a7;padding-left:.6em;margin:.6em 0} .call.error{border-color:#c44}
.tag{display:inline-block;border-radius:3px;padding:0 .4em;font-size:.85em;background:#eee;margin-right:.3em}
.tag.error{background:#fdd;color:#900} .tag.pass{background:#dfd;color:#060}
.add{color:#060;background:#efe;display:block} .del{color:#900;background:#fee;display:block}
.hunk{color:#55a;display:block} table{border-collapse:collapse} td,th{border:1px solid #ddd;padding:.2em .5em}
.meta{color:#666;font-size:.9em}
.path{font:600 12px ui-monospace,monospace;margin:.4em 0 0}
pre.code{counter-reset:line;white-space:pre;overflow-x:auto}
pre.code .ln{counter-increment:line}
pre.code .ln::before{content:counter(line);display:inline-block;width:3em;margin-right:.8em;text-align:right;color:#aaa;
 user-select:none}
pre.diff{white-space:pre;overflow-x:auto} pre.diff span{display:block;min-height:1.35em}
"""


_FILE_TOOLS = ("Write", "Edit", "MultiEdit")


def _pre(text: str, css_class: str = "") -> str:
    return f'<pre class="{css_class}">{escape(text)}</pre>' if css_class else f"<pre>{escape(text)}</pre>"


def _diff(diff: str) -> str:
    lines = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---", "@@")):
            kind = "hunk"
        else:
            kind = "add" if line.startswith("+") else "del" if line.startswith("-") else ""
        # Every line a block of its own (so added and removed lines are shaded across the width), joined without
        # newlines, which would show as blank lines between the blocks.
        lines.append(f'<span class="{kind or "ctx"}">{escape(line)}</span>')
    return '<pre class="diff">' + "".join(lines) + "</pre>"


def _no_verdict(judge_error: str | None) -> str:
    return f"<p>none: {escape(judge_error)} (our failure, not the candidate's)</p>" if judge_error else "<p>none</p>"


def _number(value: Any, suffix: str = "") -> str:
    """A figure as a reader takes it in (4 significant digits), '-' where there is none."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-" if value is None else escape(str(value))
    return f"{value:.4g}{suffix}"


def _timings(timings: dict[str, Any]) -> str:
    """The verdict's times, one `name: value ms` line each (eager, compile, solution...)."""
    return "<br>".join(f"{escape(str(name))}: {_number(ms, ' ms')}" for name, ms in timings.items()) or "-"


def _verdict(verdict: dict[str, Any]) -> str:
    name = str(verdict.get("verdict", "?"))
    rows = [
        ("verdict", f'<span class="tag {"pass" if name == "pass" else "error"}">{escape(name)}</span>'),
        ("reward", _number(verdict.get("reward"))),
        ("speedup vs eager", _number(verdict.get("speedup_vs_eager"), "x")),
        ("speedup vs compile", _number(verdict.get("speedup_vs_compile"), "x")),
        ("timings", _timings(verdict.get("timings_ms") or {})),
        ("device", escape(str(verdict.get("device", "")))),
    ]
    table = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    extra = _pre(verdict["message"]) if verdict.get("message") else ""
    for violation in verdict.get("violations") or []:
        extra += _pre(f"[{violation.get('check')}] {violation.get('message')}", "error")
    if verdict.get("compile_log"):
        extra += _pre(verdict["compile_log"])
    return f'<div class="verdict"><table>{table}</table>{extra}</div>'


def _code(text: str) -> str:
    """A file's text as a code block with line numbers (drawn by CSS, so copying takes the code alone)."""
    lines = "\n".join(f'<span class="ln">{escape(line)}</span>' for line in text.splitlines())
    return f'<pre class="code">{lines}</pre>'


def _edit_diff(path: str, old: Any, new: Any) -> str:
    """The diff an Edit asked for, from its own strings (when the tool refused it, no file diff exists)."""
    if not isinstance(old, str) or not isinstance(new, str):
        return ""
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), f"a/{path}", f"b/{path}", lineterm="")
    return "\n".join(lines)


def _file_change(call: ToolCall, args: dict[str, Any], result: ToolResult | None) -> str:
    """Write shows the file as code; Edit and MultiEdit show a diff: what the model wrote, readable."""
    path = str(args.get("path", ""))
    done = result.metadata.get("diff") if result is not None else None
    parts = [f'<div class="path">{escape(call.name)} {escape(path)}</div>']
    if call.name == "Write":
        parts.append(_code(str(args.get("content", ""))))
        # A replaced file: the diff against what was there says what changed (a new file's diff is the code again).
        if isinstance(done, str) and done and "@@ -0,0 " not in done:
            parts.append(f"<details><summary>diff against the previous file</summary>{_diff(done)}</details>")
        return "".join(parts)
    if isinstance(done, str) and done:
        return "".join([*parts, _diff(done)])
    edits = args.get("edits") if call.name == "MultiEdit" else [args]
    for edit in edits if isinstance(edits, list) else []:
        if isinstance(edit, dict):
            parts.append(_diff(_edit_diff(path, edit.get("old_string"), edit.get("new_string"))))
    return "".join(parts)


def _arguments(call: ToolCall, result: ToolResult | None) -> str:
    """A call's arguments as a reader wants them: files as code or diffs, commands as shell lines, the rest as
    `key: value` (multi-line values as blocks); arguments that are not a JSON object, as sent."""
    try:
        args = json.loads(call.arguments)
    except json.JSONDecodeError:
        args = None
    if not isinstance(args, dict):
        return _pre(call.arguments)
    if call.name in _FILE_TOOLS:
        return _file_change(call, args, result)
    if call.name == "Bash" and isinstance(args.get("command"), str):
        return f'<pre class="command">$ {escape(args["command"])}</pre>'
    simple = [f"{escape(k)}: {escape(json.dumps(v, ensure_ascii=False))}" for k, v in args.items() if not _multiline(v)]
    blocks = [f'<div class="path">{escape(k)}</div>{_pre(v)}' for k, v in args.items() if _multiline(v)]
    return (f'<pre class="args">{"  ".join(simple)}</pre>' if simple else "") + "".join(blocks)


def _multiline(value: Any) -> bool:
    return isinstance(value, str) and "\n" in value


def _call(call: ToolCall, result: ToolResult | None) -> str:
    failed = result is not None and result.is_error
    tags = f'<span class="tag">{escape(call.name or "(no name)")}</span>'
    if failed:
        tags += '<span class="tag error">error</span>'
    if result is not None and result.truncated:
        tags += '<span class="tag">truncated</span>'
    if result is not None:
        tags += f'<span class="meta">{result.duration_s:.2f} s</span>'
    parts = [f'<div class="call{" error" if failed else ""}">{tags}', _arguments(call, result)]
    if call.error:
        parts.append(_pre(f"parse error: {call.error}", "error"))
    if result is not None:
        parts.append(_pre(result.output, "output"))
    return "".join(parts) + "</div>"


def _turn(turn: Turn) -> str:
    results = {r.tool_call_id: r for r in turn.tool_results}
    tokens = "" if turn.completion_tokens is None else f", {turn.completion_tokens} tokens"
    finish = "" if turn.finish_reason is None else f", finish: {escape(str(turn.finish_reason))}"
    head = (
        f'<h2>Turn {turn.index + 1}</h2><div class="meta">model {turn.model_s:.1f} s, tools {turn.tools_s:.1f} s'
        f"{tokens}{finish}</div>"
    )
    body = [head, _pre(turn.content) if turn.content else ""]
    body += [_call(call, results.get(call.id)) for call in turn.tool_calls]
    body += [_pre(f"{m.get('role')}: {m.get('content')}") for m in turn.extra_messages]
    body += [_verdict(v.model_dump(mode="json")) for v in turn.verdicts]
    return f'<section class="turn" id="turn-{turn.index}">' + "".join(body) + "</section>"


def render_html(trajectory: Trajectory) -> str:
    """The whole page for one trajectory."""
    t = trajectory
    status = t.exit_status or ("(still running or crashed)" if not t.complete else "(none)")
    summary = (
        f'<p class="meta">model {escape(t.model)} · started {escape(t.started_at)} · {len(t.turns)} turns · '
        f"exit {escape(status)} · terminated {t.terminated} · truncated {t.truncated} · "
        f"reward <b>{escape(str(t.reward))}</b></p>"
    )
    prompt = "".join(f"<h2>{escape(str(m.get('role')))}</h2>{_pre(str(m.get('content') or ''))}" for m in t.prompt)
    parts = [
        f"<h1>Episode: {escape(t.task)}</h1>",
        summary,
        f'<details class="prompt"><summary>Prompt ({len(t.prompt)} messages)</summary>{prompt}</details>',
        *(_turn(turn) for turn in t.turns),
        '<section class="final"><h2>Final verdict</h2>'
        + (_verdict(t.verdict.model_dump(mode="json")) if t.verdict else _no_verdict(t.judge_error)),
        "</section>",
    ]
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(t.task)} · cuda-agent</title>'
        f"<style>{_CSS}</style></head><body>{''.join(parts)}</body></html>\n"
    )


def write_view(trajectory_path: Path, output_path: Path) -> Path:
    """Read a trajectory JSONL file and write its HTML page; returns the page's path."""
    html = render_html(read_trajectory(trajectory_path))
    output_path = Path(output_path)
    output_path.parent.mkdir(parents=True, exist_ok=True)
    output_path.write_text(html, encoding="utf-8")
    return output_path
