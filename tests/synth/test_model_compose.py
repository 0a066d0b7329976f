"""The model-backed composer: the rules pick the operators, a model writes the file."""

from __future__ import annotations

from cuda_agent.agent.models import ModelTurn
from cuda_agent.synth.catalog import probe
from cuda_agent.synth.compose import ComposeConfig
from cuda_agent.synth.model_compose import extract_code, model_composer

from .test_decontaminate import KB


class ScriptedServer:
    """Stands in for an OpenAI-compatible server (external): answers every prompt with one file."""

    name = "scripted"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def complete(self, messages, tools) -> ModelTurn:
        self.prompts.append(messages[-1]["content"])
        return ModelTurn(content=f"Here it is:\n```python\n{KB}```\n")


def test_model_writes_the_problem_for_the_drawn_operators() -> None:
    ops = [probe("torch.relu", "function"), probe("torch.tanh", "function")]
    server = ScriptedServer()
    candidate = model_composer(server, ops, 0, ComposeConfig(), 1.0, 100.0)(5)
    assert candidate is not None and candidate.composer == "scripted"
    assert candidate.code.strip() == KB.strip()
    assert all(op in server.prompts[0] for op in candidate.ops)


def test_extract_code_takes_the_last_block() -> None:
    assert extract_code("```python\nA\n```\nthen\n```python\nB\n```") == "B\n"
    assert extract_code("no code") is None
