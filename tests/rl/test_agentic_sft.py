"""Scripted multi-turn SFT data of the agentic curriculum, played through `CudaAgentLoop` with real tools and judge."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl", reason="verl is not installed (pip install -e '.[rl]')")

from cuda_agent.agent.models.tool_text import parse_tool_calls  # noqa: E402
from cuda_agent.agent.tools import SandboxShell  # noqa: E402
from cuda_agent.errors import ConfigError  # noqa: E402
from cuda_agent.rl import agentic_curriculum as ac  # noqa: E402
from cuda_agent.rl.agentic_sft import (  # noqa: E402
    SCRIPTS,
    assistant_text,
    check_prompt_budget,
    held_out_leaks,
    play_scripts,
    scripted_turns,
    write_agentic_data,
)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("script", list(SCRIPTS))
def test_scripts_do_what_they_are_named_for(script: str, device: str) -> None:
    turns = scripted_turns(ac.task_named("add_relu"), script, device)
    commands = [json.loads(c.arguments).get("command", "") for t in turns for c in t.tool_calls if c.name == "Bash"]
    assert not turns[-1].tool_calls and all(t.tool_calls for t in turns[:-1])
    assert any("utils.verification" in c for c in commands) == (script not in ("give_up", "unverified"))
    assert sum("utils/compile.sh" in c for c in commands) == len(SCRIPTS[script].attempts)
    for turn in turns:  # what the model writes parses back to the same calls
        _, calls = parse_tool_calls(assistant_text(turn))
        assert [(c.name, json.loads(c.arguments)) for c in calls] == [
            (c.name, json.loads(c.arguments)) for c in turn.tool_calls
        ]


def test_held_out_leaks_names_a_held_out_row() -> None:
    clean = {"task": "agentic/relu", "messages": [{"role": "user", "content": "cuda_extension.relu(x)"}]}
    leaky = {"task": "agentic/relu", "messages": [{"role": "assistant", "content": "cuda_extension.clamp(x)"}]}
    assert held_out_leaks([clean]) == []
    assert held_out_leaks([clean, leaky, {"extra_info": {"task": "agentic/row_max"}}]) == [
        "row 1 (agentic/relu) is held-out task agentic/clamp",
        "row 2 (agentic/row_max) is held-out task agentic/row_max",
    ]


def test_prompt_budget_is_checked_before_anything_runs(tiny_tokenizer: Any) -> None:
    compact = check_prompt_budget(tiny_tokenizer, 100_000, "cpu", compact=True)
    assert compact < check_prompt_budget(tiny_tokenizer, 100_000, "cpu", compact=False)
    with pytest.raises(ConfigError, match=f"the first prompt is {compact} tokens, over the prompt budget of 100 "):
        check_prompt_budget(tiny_tokenizer, 100, "cpu", compact=True)


@pytest.mark.integration
@pytest.mark.slow
def test_sft_rows_replay_through_the_agent_loop_to_the_same_tokens_and_masks(
    tiny_tokenizer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cheapest script (one failing build, then the final judgement), written as data and played again.
    The test tokenizer has no merges (a byte a token), hence the long context."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    task = ac.task_named("relu")
    manifest = write_agentic_data(
        tmp_path / "data", tiny_tokenizer, "cpu", scripts=("give_up",), copies=2, context_tokens=65536
    )
    import pyarrow.parquet as pq

    rows = pq.read_table(tmp_path / "data" / "sft.parquet").to_pylist()
    assert len(rows) == 2 * len(ac.split(held_out=False)) and held_out_leaks(rows) == []
    assert {r["task"] for r in rows} == {t.ref for t in ac.split(held_out=False)}
    held = pq.read_table(tmp_path / "data" / "heldout.parquet").to_pylist()
    train = pq.read_table(tmp_path / "data" / "rl.parquet").to_pylist()
    assert {r["extra_info"]["task"] for r in held} == {t.ref for t in ac.split(held_out=True)}
    assert {r["extra_info"]["task"] for r in train} == {t.ref for t in ac.split(held_out=False)}
    assert held_out_leaks(train) == [] and len(held_out_leaks(held)) == len(held)
    assert all(e["verdict"] == "compile_error" and e["turns"] == 6 for e in manifest["episodes"])
    row = next(r for r in rows if r["task"] == task.ref)
    # Commands ran as sandbox jobs, as in RL's rollouts through a service: the prompt's Bash is that one.
    bash = next(t["function"]["description"] for t in row["tools"] if t["function"]["name"] == "Bash")
    assert bash.startswith(SandboxShell.description)

    again = play_scripts(tiny_tokenizer, [(task, "give_up")], "cpu", tmp_path / "again", context_tokens=65536)[0]
    assert again["input_ids"] == row["input_ids"] and again["loss_mask"] == row["loss_mask"]

    # The loss mask is 1 exactly on what the model wrote: each turn's text and its end token, in order.
    ids, mask = row["input_ids"], row["loss_mask"]
    spans, start = [], None
    for i, bit in enumerate([*mask, 0]):
        if bit and start is None:
            start = i
        elif not bit and start is not None:
            spans.append(ids[start:i])
            start = None
    written = [assistant_text(t) + "<|im_end|>" for t in scripted_turns(task, "give_up", "cpu")]
    assert [tiny_tokenizer.decode(s) for s in spans] == written
    masked = tiny_tokenizer.decode([t for t, bit in zip(ids, mask, strict=True) if not bit])
    assert "was not declared" in masked and "<tool_response>" in masked  # the compiler's error: seen, not trained
