"""The optional model-backed composer: an LLM writes the problem for an operator list the rules drew.

The paper composed Ops-6K with an LLM; this composer asks any backend of `cuda_agent.agent.models`
(an OpenAI-compatible server, a local transformers model, a replay) for the file. Its output is
untrusted code, so it goes through exactly the same filters and decontamination as the rule-based
composer's: nothing here runs it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from cuda_agent.synth.catalog import OpSpec
from cuda_agent.synth.compose import Candidate, ComposeConfig, compose

_PROMPT = Path(__file__).parent / "prompts" / "compose.md.jinja"
_CODE_BLOCK = re.compile(r"```(?:python)?\n(.*?)```", re.S)


def render_prompt(ops: list[str], config: ComposeConfig, min_ms: float, max_ms: float) -> str:
    import jinja2

    template = jinja2.Template(_PROMPT.read_text(), undefined=jinja2.StrictUndefined)
    lo, hi = config.numel_range()
    return template.render(ops=ops, device=config.device, min_ms=min_ms, max_ms=max_ms, numel=int((lo * hi) ** 0.5))


def extract_code(text: str) -> str | None:
    """The last python code block of a reply (models often draft first), or None."""
    blocks = _CODE_BLOCK.findall(text)
    return blocks[-1].strip() + "\n" if blocks else None


def model_composer(
    model, ops: list[OpSpec], seed: int, config: ComposeConfig, min_ms: float, max_ms: float
) -> Callable[[int], Candidate | None]:
    """A composer for the pipeline: the rules draw the operator list, `model` writes the file.

    Args:
        model: a `cuda_agent.agent.models.Model` (see `get_model(spec)`).
    """

    def draw(index: int) -> Candidate | None:
        skeleton = compose(ops, seed, index, config)
        if skeleton is None:
            return None
        prompt = render_prompt(skeleton.ops, config, min_ms, max_ms)
        turn = model.complete([{"role": "user", "content": prompt}], [])
        code = extract_code(turn.content)
        if code is None:
            return None
        return Candidate(index=index, ops=skeleton.ops, code=code, composer=getattr(model, "name", "model"))

    return draw
