"""Model backends behind one interface (`Model`), and `get_model(spec)` to pick one by a short spec.

| spec | backend |
|---|---|
| `http://host:8000/v1`, `https://...` | `OpenAIModel`: any OpenAI-compatible chat-completions server |
| `openai` | `OpenAIModel` with OPENAI_BASE_URL from the environment |
| `hf:PATH` | `TransformersModel`: a local transformers model folder |
| `replay:FILE` | `ReplayModel`: the assistant turns of a recorded trajectory |
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cuda_agent.agent.models.base import Message, Model, ModelTurn, ToolSchema
from cuda_agent.agent.models.openai_compat import OpenAIModel
from cuda_agent.agent.models.replay import ReplayModel
from cuda_agent.agent.models.tool_text import parse_tool_calls
from cuda_agent.errors import ConfigError


def _transformers(path: str, **options: Any) -> Model:
    from cuda_agent.agent.models.transformers_local import TransformersModel

    return TransformersModel(path, **options)


_BACKENDS: dict[str, Callable[..., Model]] = {
    "http": lambda spec, **o: OpenAIModel(spec, **o),
    "https": lambda spec, **o: OpenAIModel(spec, **o),
    "openai": lambda _rest, **o: OpenAIModel(None, **o),
    "hf": _transformers,
    "replay": lambda path, **o: ReplayModel.from_file(Path(path), **o),
}
_KEEPS_SCHEME = {"http", "https"}


def get_model(spec: str, **options: Any) -> Model:
    """Build the backend a spec names; `options` go to its constructor (e.g. temperature, logprobs).

    Raises:
        ConfigError: the spec names no known backend.
    """
    scheme, _, rest = spec.partition(":")
    backend = _BACKENDS.get(scheme)
    if backend is None or (scheme not in _KEEPS_SCHEME and scheme != "openai" and not rest):
        raise ConfigError(
            f"unknown model spec {spec!r}: use an http(s) URL of an OpenAI-compatible server "
            f"(e.g. http://localhost:8000/v1), 'openai' (OPENAI_BASE_URL), hf:PATH or replay:FILE"
        )
    return backend(spec if scheme in _KEEPS_SCHEME else rest, **options)


__all__ = ["Message", "Model", "ModelTurn", "OpenAIModel", "ReplayModel", "ToolSchema", "get_model", "parse_tool_calls"]
