"""The episode's opening messages, rendered from the templates in prompts/ (Jinja, StrictUndefined).

Apart from the loop, so that whoever writes a dataset of prompts (rl/data.py) renders the same
text without importing the episode loop.
"""

from __future__ import annotations

from pathlib import Path

PROMPTS = Path(__file__).parent / "prompts"


def _render(name: str, **values: object) -> str:
    import jinja2

    template = jinja2.Template((PROMPTS / name).read_text(), undefined=jinja2.StrictUndefined)
    return template.render(**values).strip()


def system_prompt(root: Path, tools: list[str]) -> str:
    """SKILL.md of the workspace, introduced as the agent's instructions (prompts/system.md.jinja)."""
    return _render("system.md.jinja", tools=", ".join(tools), skill=(root / "SKILL.md").read_text())


def task_prompt(task_ref: str) -> str:
    """The user's message that names the task (prompts/task.md.jinja)."""
    return _render("task.md.jinja", ref=task_ref)
