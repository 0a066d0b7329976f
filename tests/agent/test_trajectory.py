"""Trajectory JSONL: written per turn, read back after a crash, replayed turn for turn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.agent.models import ModelTurn, ReplayModel, get_model
from cuda_agent.agent.tools import build_toolset
from cuda_agent.agent.trajectory import TrajectoryError, TrajectoryWriter, read_trajectory
from cuda_agent.errors import ModelError
from cuda_agent.types import ToolCall, Verdict
from tests.agent.conftest import is_editable

PROMPT = [{"role": "system", "content": "skill"}, {"role": "user", "content": "task"}]
SCRIPT = [
    ModelTurn(content="read", tool_calls=[ToolCall(id="a", name="Read", arguments='{"path": "model_new.py"}')]),
    ModelTurn(
        content="edit",
        tool_calls=[
            ToolCall(
                id="b",
                name="Edit",
                arguments=json.dumps({"path": "model_new.py", "old_string": "pass", "new_string": "x = 1"}),
            )
        ],
        token_ids=[5, 6, 7],
        logprobs=[-0.1, -0.2, -0.3],
    ),
    ModelTurn(content="done", finish_reason="stop"),
]


def run_episode(model, workspace: Path, path: Path, turns: int = 3, finish: bool = True) -> list[dict]:
    """A minimal loop, as the real one will be: complete, execute, record."""
    messages = list(PROMPT)
    with (
        build_toolset(workspace, is_editable) as tools,
        TrajectoryWriter(path, "examples/relu", model.name, PROMPT, tools.schemas(), {"seed": 0}) as writer,
    ):
        for index in range(turns):
            reply = model.complete(messages, tools.schemas())
            results = [tools.execute(call) for call in reply.tool_calls]
            turn = reply.to_turn(index, results, model_s=0.01, tools_s=0.02)
            messages.extend(turn.messages())
            writer.append(turn)
        if finish:
            verdict = Verdict(task="examples/relu", verdict="pass", reward=3, correct=True)
            writer.finish(verdict, 3, "finished", terminated=True)
    return messages


def test_round_trip_and_replay_reproduce_the_episode(workspace: Path, tmp_path: Path) -> None:
    path = tmp_path / "run" / "trajectory.jsonl"
    messages = run_episode(ReplayModel(SCRIPT), workspace, path)
    trajectory = read_trajectory(path)
    assert trajectory.complete and trajectory.exit_status == "finished" and trajectory.reward == 3
    assert trajectory.terminated and not trajectory.truncated
    assert trajectory.verdict.verdict == "pass"
    assert trajectory.messages() == messages
    assert trajectory.turns[1].token_ids == [5, 6, 7] and trajectory.turns[1].logprobs == [-0.1, -0.2, -0.3]
    assert "+    x = 1" in trajectory.turns[1].tool_results[0].metadata["diff"]

    replay_workspace = tmp_path / "again"
    replay_workspace.mkdir()
    (replay_workspace / "kernels").mkdir()
    (replay_workspace / "model_new.py").write_text("class ModelNew:\n    pass\n")
    replayed_path = tmp_path / "replayed.jsonl"
    run_episode(get_model(f"replay:{path}"), replay_workspace, replayed_path)
    assert (replay_workspace / "model_new.py").read_text() == "class ModelNew:\n    x = 1\n"
    replayed = read_trajectory(replayed_path)
    assert [t.tool_calls for t in replayed.turns] == [t.tool_calls for t in trajectory.turns]


def test_crash_keeps_the_finished_turns(workspace: Path, tmp_path: Path) -> None:
    path = tmp_path / "trajectory.jsonl"
    run_episode(ReplayModel(SCRIPT), workspace, path, turns=2, finish=False)
    with path.open("a") as file:
        file.write('{"type": "turn", "index": 2, "cont')  # the process died mid-line
    trajectory = read_trajectory(path)
    assert not trajectory.complete and trajectory.exit_status is None
    assert [t.content for t in trajectory.turns] == ["read", "edit"]


def test_damaged_or_foreign_files_are_refused(tmp_path: Path) -> None:
    foreign = tmp_path / "other.jsonl"
    foreign.write_text('{"hello": 1}\n')
    with pytest.raises(TrajectoryError, match="does not start with a trajectory header"):
        read_trajectory(foreign)
    with pytest.raises(TrajectoryError, match="cannot read trajectory"):
        read_trajectory(tmp_path / "missing.jsonl")


def test_replay_that_runs_out_says_so(workspace: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="the replay ran out: it holds 3 turns"):
        run_episode(ReplayModel(SCRIPT), workspace, tmp_path / "t.jsonl", turns=4)


def test_replay_detects_a_tool_that_now_fails(workspace: Path, tmp_path: Path) -> None:
    path = tmp_path / "recorded.jsonl"
    run_episode(ReplayModel(SCRIPT), workspace, path)
    changed = tmp_path / "changed"
    (changed / "kernels").mkdir(parents=True)
    (changed / "model_new.py").write_text("class ModelNew:\n    return_nothing = 0\n")  # no 'pass' to edit
    with pytest.raises(ModelError, match="the replay diverged at turn 2: Edit failed now but succeeded"):
        run_episode(ReplayModel.from_file(path), changed, tmp_path / "replayed.jsonl")


def test_replay_detects_a_different_conversation() -> None:
    model = ReplayModel(SCRIPT)
    model.complete(PROMPT, [])
    with pytest.raises(ModelError, match="holds 0 assistant turns but the replay has played 1"):
        model.complete(PROMPT, [])
    answered_nothing = [*PROMPT, SCRIPT[0].message()]
    with pytest.raises(ModelError, match=r"turn 1 called Read \(a\) and got no answer"):
        model.complete(answered_nothing, [])
