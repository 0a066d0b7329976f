"""Search tools: Glob (file names by pattern) and Grep (Python regular expressions over text files).

Both stay inside the workspace root: results that resolve outside it (through symlinks) are
dropped, and binary or very large files are skipped by Grep.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Any

from cuda_agent.agent.tools.base import Observation, ToolError, Workspace, function_schema

MAX_RESULTS = 200
MAX_GREP_FILE_BYTES = 2_000_000
_SKIPPED_DIRS = {".git", "__pycache__", ".ipynb_checkpoints"}


def _inside(workspace: Workspace, path: Path) -> bool:
    resolved = path.resolve()
    return resolved == workspace.root or workspace.root in resolved.parents


def _walk_files(workspace: Workspace, base: Path) -> list[Path]:
    if base.is_file():
        return [base]
    return sorted(
        p
        for p in base.rglob("*")
        if p.is_file() and not _SKIPPED_DIRS.intersection(p.relative_to(base).parts) and _inside(workspace, p)
    )


class GlobTool:
    """List files whose root-relative path matches a glob pattern."""

    name = "Glob"

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def schema(self) -> dict[str, Any]:
        return function_schema(
            self.name,
            "Find files by name pattern, e.g. 'kernels/*.cu' or '**/*.py'. Paths are relative to the workspace root.",
            {
                "pattern": {"type": "string", "description": "Glob pattern; '**' matches any number of folders."},
                "path": {"type": "string", "description": "Folder to search in (relative). Default: the root."},
            },
            ["pattern"],
        )

    def run(self, arguments: dict[str, Any]) -> Observation:
        pattern = arguments.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ToolError("'pattern' is required, e.g. 'kernels/*.cu'")
        base = self.workspace.resolve(arguments.get("path") or ".")
        if not base.is_dir():
            raise ToolError(f"'{self.workspace.relative(base)}' is not a folder")
        try:
            found = sorted(p for p in base.glob(pattern) if p.is_file() and _inside(self.workspace, p))
        except (ValueError, NotImplementedError) as exc:
            raise ToolError(f"bad glob pattern {pattern!r}: {exc}") from exc
        names = [self.workspace.relative(p.resolve()) for p in found]
        if not names:
            return Observation(text=f"No files match {pattern!r}.")
        truncated = len(names) > MAX_RESULTS
        lines = names[:MAX_RESULTS]
        if truncated:
            lines.append(f"[{len(names) - MAX_RESULTS} more files not shown; narrow the pattern]")
        return Observation(text="\n".join(lines), truncated=truncated)


class GrepTool:
    """Search text files for a Python regular expression; prints path:line:text."""

    name = "Grep"

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def schema(self) -> dict[str, Any]:
        return function_schema(
            self.name,
            "Search file contents with a Python regular expression. Prints 'path:line: text' for each matching "
            f"line (at most {MAX_RESULTS}), or only file names with files_only. Binary files are skipped.",
            {
                "pattern": {"type": "string", "description": "Python regular expression (re module syntax)."},
                "path": {"type": "string", "description": "File or folder to search (relative). Default: the root."},
                "glob": {"type": "string", "description": "Only files whose name matches, e.g. '*.cu'."},
                "ignore_case": {"type": "boolean", "description": "Case-insensitive match. Default false."},
                "files_only": {"type": "boolean", "description": "List matching files instead of lines."},
            },
            ["pattern"],
        )

    def run(self, arguments: dict[str, Any]) -> Observation:
        try:
            regex = re.compile(arguments.get("pattern") or "", re.IGNORECASE if arguments.get("ignore_case") else 0)
        except re.error as exc:
            raise ToolError(f"bad regular expression: {exc}; Grep uses Python 're' syntax") from exc
        if not regex.pattern:
            raise ToolError("'pattern' is required")
        base = self.workspace.resolve(arguments.get("path") or ".")
        if not base.exists():
            raise ToolError(f"'{self.workspace.relative(base)}' does not exist")
        name_glob = arguments.get("glob")
        hits: list[str] = []
        for path in _walk_files(self.workspace, base):
            if name_glob and not fnmatch.fnmatch(path.name, name_glob):
                continue
            hits.extend(self._search(path, regex, bool(arguments.get("files_only"))))
            if len(hits) > MAX_RESULTS:
                break
        if not hits:
            return Observation(text=f"No matches for {regex.pattern!r}.")
        truncated = len(hits) > MAX_RESULTS
        lines = hits[:MAX_RESULTS] + (["[more matches not shown; narrow the pattern or path]"] if truncated else [])
        return Observation(text="\n".join(lines), truncated=truncated)

    def _search(self, path: Path, regex: re.Pattern[str], files_only: bool) -> list[str]:
        if path.stat().st_size > MAX_GREP_FILE_BYTES:
            return []
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            return []
        relative = self.workspace.relative(path.resolve())
        hits = []
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
            if regex.search(line):
                if files_only:
                    return [relative]
                hits.append(f"{relative}:{number}: {line[:500]}")
        return hits
