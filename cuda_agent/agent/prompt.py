"""The episode's opening messages, rendered from the templates in prompts/ (Jinja, StrictUndefined).

Apart from the loop, so that whoever writes a dataset of prompts (rl/data.py) renders the same
text without importing the episode loop.
"""

from __future__ import annotations

from pathlib import Path

from cuda_agent.types import Language

PROMPTS = Path(__file__).parent / "prompts"


def _render(name: str, **values: object) -> str:
    import jinja2

    template = jinja2.Template((PROMPTS / name).read_text(), undefined=jinja2.StrictUndefined)
    return template.render(**values).strip()


def system_prompt(root: Path, tools: list[str], compact: bool = False, language: Language = "cuda") -> str:
    """SKILL.md of the workspace, introduced as the agent's instructions (prompts/system.md.jinja); or, with
    `compact`, the few rules a small-context model needs instead (prompts/system_compact.md.jinja, ~200 tokens
    against SKILL.md's ~2,700: SmolLM2's 8k context holds a whole episode then). `language`: the workspace's kernel
    language ('cuda' or 'triton'), which the text names."""
    if compact:
        return _render("system_compact.md.jinja", tools=", ".join(tools), language=language)
    skill = (root / "SKILL.md").read_text()
    return _render("system.md.jinja", tools=", ".join(tools), skill=skill, language=language)


def task_prompt(task_ref: str, language: Language = "cuda") -> str:
    """The user's message that names the task (prompts/task.md.jinja)."""
    return _render("task.md.jinja", ref=task_ref, language=language)


def opening_messages(
    root: Path, tools: list[str], task_ref: str, compact: bool = False, language: Language = "cuda"
) -> list[dict[str, str]]:
    """The episode's first two messages: the system prompt (`system_prompt`) and the task."""
    return [
        {"role": "system", "content": system_prompt(root, tools, compact, language)},
        {"role": "user", "content": task_prompt(task_ref, language)},
    ]
