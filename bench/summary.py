"""The one small summary every benchmark writes beside its detailed output: `NAME.json` and `NAME.md`.

A summary holds sections (a part of the benchmark, a setting, a task), each a flat mapping of figure to value, so
that a reader compares runs without opening the per-run files: the JSON for scripts, the Markdown table for people.
Only plain values (numbers, strings, booleans, None) are kept; nested detail stays in the benchmark's own files.
"""

from __future__ import annotations

import json
from pathlib import Path

Plain = int | float | str | bool | None


def plain(figures: dict) -> dict[str, Plain]:
    """The top-level figures of `figures` that are plain values (lists and mappings are detail, left out)."""
    return {key: value for key, value in figures.items() if isinstance(value, Plain)}


def shown(value: Plain) -> str:
    """A figure as the table shows it: floats to 4 significant digits (the JSON keeps them whole)."""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def write_summary(out: Path, name: str, title: str, sections: dict[str, dict], command: str) -> Path:
    """Write `out/NAME.json` and `out/NAME.md` (a table per section) and return the Markdown file's path."""
    out.mkdir(parents=True, exist_ok=True)
    kept = {section: plain(figures) for section, figures in sections.items()}
    (out / f"{name}.json").write_text(json.dumps({"title": title, "command": command, "sections": kept}, indent=1))
    lines = [f"# {title}", "", f"`{command}`", ""]
    for section, figures in kept.items():
        lines += [f"## {section}", "", "| figure | value |", "|---|---|"]
        lines += [f"| {key} | {shown(value)} |" for key, value in figures.items()]
        lines.append("")
    path = out / f"{name}.md"
    path.write_text("\n".join(lines))
    return path
