"""The bundled demo episode: a recorded agent solving `examples/relu`, replayed through real tools.

The recordings in `demos/` were made by `scripts/record_demo.py`: a scripted model (the
replies of a competent agent, written out by hand) driven through the real loop, workspace,
builds and judge, so every tool output in them is real. Replaying one runs all of that again on
this machine; only the model's replies come from the file.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from cuda_agent.agent.models.base import ModelTurn
from cuda_agent.types import ToolCall

DEMO_TASK = "examples/relu"


def recording_path(device: str) -> Path:
    return Path(str(resources.files("cuda_agent.agent").joinpath("demos", f"examples_relu_{device}.jsonl")))


def demo_recording(device: str) -> tuple[Path, str, str]:
    """The recording to replay on `device`: (path, device it runs on, a note for the user)."""
    if recording_path(device).is_file():
        return recording_path(device), device, ""
    return recording_path("cpu"), "cpu", f"No {device} recording is bundled, so the CPU variant runs."


def scripted_turns(kernels: dict[str, str], model_new: str, device: str) -> list[ModelTurn]:
    """The replies of the demo episode: read, write the kernels, compile, verify, profile, finish."""
    calls: list[tuple[str, str, dict]] = [
        ("I will read the reference and the instructions first.", "Read", {"path": "model.py"}),
        ("", "Read", {"path": "kernels/example_scale_binding.cpp"}),
    ]
    for name, text in sorted(kernels.items()):
        calls.append((f"Writing {name}.", "Write", {"path": f"kernels/{name}", "content": text}))
    calls += [
        ("", "Read", {"path": "model_new.py"}),
        ("ModelNew calls the registered kernel.", "Write", {"path": "model_new.py", "content": model_new}),
        ("", "Bash", {"command": "rm kernels/example_scale* && bash utils/compile.sh"}),
        ("", "Bash", {"command": "python -m utils.verification"}),
        ("", "Bash", {"command": "python -m utils.profiling"}),
    ]
    turns = [
        ModelTurn(content=text, tool_calls=[ToolCall(id=f"call_{i}", name=tool, arguments=json.dumps(args))])
        for i, (text, tool, args) in enumerate(calls)
    ]
    kind = "CUDA" if device == "cuda" else "C++"
    turns.append(ModelTurn(content=f"Done: model_new.py calls a {kind} ReLU kernel; verification passes."))
    return turns
