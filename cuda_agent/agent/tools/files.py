"""File tools: Read (numbered lines), Write (read-before-write), Edit (unique exact replace), MultiEdit (atomic).

Writes go only to files the workspace's `is_editable` predicate accepts. An existing file must
have been Read in this episode, and not changed since, before Write, Edit or MultiEdit touch it:
the model then edits what it has seen, not what it guesses. New files need no Read.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.agent.tools.base import Observation, ToolError, Workspace, function_schema

MAX_READ_LINES = 2000
MAX_LINE_CHARS = 2000
MAX_DIFF_CHARS = 20_000


@dataclass
class ReadLog:
    """Which files the model has read in this episode, with the (mtime, size) it saw."""

    seen: dict[Path, tuple[int, int]] = field(default_factory=dict)

    def record(self, path: Path) -> None:
        stat = path.stat()
        self.seen[path] = (stat.st_mtime_ns, stat.st_size)

    def check_fresh(self, path: Path, relative: str) -> None:
        """Raise ToolError unless the existing file `path` was read and has not changed since."""
        if path not in self.seen:
            raise ToolError(f"'{relative}' exists and you have not read it yet: Read it first, then write or edit it")
        stat = path.stat()
        if self.seen[path] != (stat.st_mtime_ns, stat.st_size):
            raise ToolError(f"'{relative}' changed since you last read it (perhaps through Bash): Read it again first")


def read_text(path: Path, relative: str) -> str:
    """The text of a regular file, or ToolError saying why it cannot be read as text."""
    if path.is_dir():
        raise ToolError(f"'{relative}' is a directory; list it with Glob (e.g. '{relative}/*') or Bash 'ls'")
    if not path.is_file():
        raise ToolError(f"'{relative}' does not exist; find files with Glob, e.g. pattern '**/*'")
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        raise ToolError(f"'{relative}' is a binary file; only text files can be read")
    return data.decode("utf-8", errors="replace")


def unified_diff(relative: str, before: str, after: str) -> str:
    """A unified diff of one file, capped so a huge rewrite cannot bloat the trajectory."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{relative}", f"b/{relative}"
    )
    diff = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return diff if len(diff) <= MAX_DIFF_CHARS else diff[:MAX_DIFF_CHARS] + "\n[diff cut]\n"


class ReadTool:
    """Read a text file with line numbers, optionally a window of lines."""

    name = "Read"

    def __init__(self, workspace: Workspace, log: ReadLog) -> None:
        self.workspace, self.log = workspace, log

    def schema(self) -> dict[str, Any]:
        return function_schema(
            self.name,
            f"Read a text file of the workspace. Lines are numbered from 1 ('   12\\tcode'); at most "
            f"{MAX_READ_LINES} lines per call. Read a file before you Write or Edit it.",
            {
                "path": {"type": "string", "description": "File path relative to the workspace root."},
                "offset": {"type": "integer", "description": "First line to show (1-based). Default 1."},
                "limit": {"type": "integer", "description": f"Number of lines to show. Default {MAX_READ_LINES}."},
            },
            ["path"],
        )

    def run(self, arguments: dict[str, Any]) -> Observation:
        path = self.workspace.resolve(arguments.get("path", ""))
        relative = self.workspace.relative(path)
        text = read_text(path, relative)
        offset = max(int(arguments.get("offset") or 1), 1)
        limit = min(max(int(arguments.get("limit") or MAX_READ_LINES), 1), MAX_READ_LINES)
        lines = text.splitlines()
        self.log.record(path)
        if not lines:
            return Observation(text=f"'{relative}' is empty.", metadata={"path": relative})
        if offset > len(lines):
            raise ToolError(f"offset {offset} is past the end of '{relative}', which has {len(lines)} lines")
        window = lines[offset - 1 : offset - 1 + limit]
        shown = [
            f"{n:>6}\t{line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + ' [line cut]'}"
            for n, line in enumerate(window, start=offset)
        ]
        last = offset + len(window) - 1
        truncated = last < len(lines)
        if truncated:
            shown.append(f"[lines {offset}-{last} of {len(lines)}; Read with offset={last + 1} for more]")
        return Observation(text="\n".join(shown), truncated=truncated, metadata={"path": relative})


class _WritingTool:
    """Shared checks of Write, Edit and MultiEdit: editable, fresh, then write and report a diff."""

    name = ""

    def __init__(self, workspace: Workspace, log: ReadLog) -> None:
        self.workspace, self.log = workspace, log

    def _target(self, arguments: dict[str, Any]) -> tuple[Path, str]:
        path = self.workspace.resolve(arguments.get("path", ""))
        self.workspace.check_editable(path)
        return path, self.workspace.relative(path)

    def _load_existing(self, path: Path, relative: str) -> str:
        text = read_text(path, relative)
        self.log.check_fresh(path, relative)
        return text

    def _commit(self, path: Path, relative: str, before: str, after: str, summary: str) -> Observation:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(after)
        self.log.record(path)
        diff = unified_diff(relative, before, after)
        return Observation(text=summary, metadata={"path": relative, "diff": diff})


class WriteTool(_WritingTool):
    """Create a file or replace the whole content of one that was read first."""

    name = "Write"

    def schema(self) -> dict[str, Any]:
        return function_schema(
            self.name,
            "Write a whole file (create it or replace it). An existing file must be Read first. Only model_new.py "
            "and files under kernels/ can be written. Prefer Edit for small changes.",
            {
                "path": {"type": "string", "description": "File path relative to the workspace root."},
                "content": {"type": "string", "description": "The complete new content of the file."},
            },
            ["path", "content"],
        )

    def run(self, arguments: dict[str, Any]) -> Observation:
        path, relative = self._target(arguments)
        content = arguments.get("content")
        if not isinstance(content, str):
            raise ToolError("'content' must be a string holding the whole file")
        existed = path.exists()
        before = self._load_existing(path, relative) if existed else ""
        verb = "Replaced" if existed else "Created"
        summary = f"{verb} '{relative}' ({len(content.splitlines())} lines)."
        return self._commit(path, relative, before, content, summary)


def replace_once(text: str, old: str, new: str, replace_all: bool, where: str) -> tuple[str, int]:
    """Replace `old` by `new` in `text`; exactly one occurrence unless `replace_all`.

    Returns:
        The new text and the number of replacements.

    Raises:
        ToolError: `old` is empty, equal to `new`, missing, or ambiguous.
    """
    if not isinstance(old, str) or not isinstance(new, str):
        raise ToolError(f"{where}: 'old_string' and 'new_string' must be strings")
    if old == "":
        raise ToolError(f"{where}: 'old_string' is empty; to create or rewrite a whole file use Write")
    if old == new:
        raise ToolError(f"{where}: 'old_string' and 'new_string' are the same; nothing would change")
    count = text.count(old)
    if count == 0:
        raise ToolError(
            f"{where}: 'old_string' was not found. It must match the file exactly, including whitespace and "
            f"indentation; Read the file and copy the text"
        )
    if count > 1 and not replace_all:
        starts, index = [], text.find(old)
        while index != -1:
            starts.append(text.count("\n", 0, index) + 1)
            index = text.find(old, index + 1)
        raise ToolError(
            f"{where}: 'old_string' occurs {count} times (at lines {', '.join(map(str, starts))}); include more "
            f"surrounding lines to make it unique, or set replace_all to true"
        )
    return text.replace(old, new), count


_EDIT_PROPERTIES = {
    "old_string": {"type": "string", "description": "Exact text to replace (must occur once unless replace_all)."},
    "new_string": {"type": "string", "description": "Text to put in its place."},
    "replace_all": {"type": "boolean", "description": "Replace every occurrence. Default false."},
}


class EditTool(_WritingTool):
    """Replace one exact, unique string in a file that was read first."""

    name = "Edit"

    def schema(self) -> dict[str, Any]:
        return function_schema(
            self.name,
            "Replace an exact string in a file you have Read. old_string must occur exactly once (or set "
            "replace_all). Only model_new.py and files under kernels/ can be edited.",
            {
                "path": {"type": "string", "description": "File path relative to the workspace root."},
                **_EDIT_PROPERTIES,
            },
            ["path", "old_string", "new_string"],
        )

    def run(self, arguments: dict[str, Any]) -> Observation:
        path, relative = self._target(arguments)
        before = self._load_existing(path, relative)
        after, count = replace_once(
            before,
            arguments.get("old_string"),
            arguments.get("new_string"),
            bool(arguments.get("replace_all", False)),
            f"Edit of '{relative}'",
        )
        return self._commit(path, relative, before, after, f"Edited '{relative}': {count} replacement(s).")


class MultiEditTool(_WritingTool):
    """Apply several exact-string edits to one file, all or none."""

    name = "MultiEdit"

    def schema(self) -> dict[str, Any]:
        edit = {"type": "object", "properties": _EDIT_PROPERTIES, "required": ["old_string", "new_string"]}
        return function_schema(
            self.name,
            "Apply several Edit-style replacements to one file you have Read, in order, each on the result of the "
            "previous. Atomic: if any edit fails, the file is left unchanged.",
            {
                "path": {"type": "string", "description": "File path relative to the workspace root."},
                "edits": {"type": "array", "items": edit, "minItems": 1, "description": "The edits, in order."},
            },
            ["path", "edits"],
        )

    def run(self, arguments: dict[str, Any]) -> Observation:
        path, relative = self._target(arguments)
        edits = arguments.get("edits")
        if not isinstance(edits, list) or not edits or not all(isinstance(e, dict) for e in edits):
            raise ToolError("'edits' must be a non-empty list of {old_string, new_string, replace_all} objects")
        before = self._load_existing(path, relative)
        after, total = before, 0
        for number, edit in enumerate(edits, start=1):
            where = f"MultiEdit of '{relative}', edit {number} of {len(edits)} (no edit was applied)"
            after, count = replace_once(
                after, edit.get("old_string"), edit.get("new_string"), bool(edit.get("replace_all", False)), where
            )
            total += count
        summary = f"Edited '{relative}': {len(edits)} edits, {total} replacement(s)."
        return self._commit(path, relative, before, after, summary)
