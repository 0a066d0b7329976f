"""The rejection fine-tuning filter: what it keeps, what it drops and why, and the SFT parquet it writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from cuda_agent.rl.rft import (
    Collected,
    TokenRecord,
    drop_nulls,
    drop_reason,
    filter_trajectories,
    find_loop,
    write_rft_data,
)
from cuda_agent.types import ToolCall, ToolResult, Trajectory, Turn


def _real_tool_schemas() -> list[dict]:
    import tempfile

    from cuda_agent.agent.tools import build_toolset
    from cuda_agent.workspace import is_editable

    with tempfile.TemporaryDirectory() as root, build_toolset(Path(root), is_editable) as tools:
        return tools.schemas()


TOOLS = _real_tool_schemas()
COMPILE = ("Bash", {"command": "bash utils/compile.sh"})


def turn(index: int, name: str, args: dict, output: str = "ok", is_error: bool = False, **call: Any) -> Turn:
    tool_call = ToolCall(id=f"call_{index}", name=name, arguments=json.dumps(args), **call)
    result = ToolResult(tool_call_id=tool_call.id, name=name, output=output, is_error=is_error)
    return Turn(index=index, content=f"step {index}", tool_calls=[tool_call], tool_results=[result])


def trajectory(*steps: tuple[str, dict], reward: float = 2, complete: bool = True, **first: Any) -> Trajectory:
    turns = [turn(i, name, args, **(first if i == 0 else {})) for i, (name, args) in enumerate(steps)]
    turns.append(Turn(index=len(turns), content="Done."))
    prompt = [{"role": "system", "content": "skill"}, {"role": "user", "content": "task"}]
    return Trajectory(
        task="examples/relu", model="m", prompt=prompt, tools=TOOLS, turns=turns, reward=reward, complete=complete
    )


def edit(n: int) -> tuple[str, dict]:
    return ("Edit", {"path": "kernels/relu.cpp", "old": f"v{n}", "new": f"v{n + 1}"})


GOOD = trajectory(("Read", {"path": "model.py"}), edit(0), COMPILE, COMPILE, edit(1), COMPILE)


def write_sft(trajectories: list[Trajectory], path: Path, tokens: list[TokenRecord | None] | None = None) -> Path:
    """The kept ones of `trajectories` written as `train rft-data` writes them (episodes read from no folder)."""
    tokens = tokens or [None] * len(trajectories)
    collected = [
        Collected(trajectory=t, tokens=k, path=path.parent / f"{i}" / "trajectory.jsonl")
        for i, (t, k) in enumerate(zip(trajectories, tokens, strict=True))
    ]
    write_rft_data(collected, path)
    return path


@pytest.mark.parametrize(
    ("name", "candidate", "reason"),
    [
        ("passing, checked twice in a row", GOOD, None),
        ("failed judge", trajectory(("Read", {"path": "model.py"}), reward=-1), "reward"),
        ("never judged", trajectory(("Read", {"path": "model.py"}), reward=None), "reward"),
        ("crashed", trajectory(("Read", {"path": "model.py"}), complete=False), "incomplete"),
        ("unparsable call", trajectory(("Write", {}), error="its body is not valid JSON"), "malformed_tool_call"),
        (
            "arguments rejected by the tool set",
            trajectory(("Write", {}), output="Error: bad arguments for Write: x. Check", is_error=True),
            "malformed_tool_call",
        ),
        (
            "a compile error is not malformed",
            trajectory(COMPILE, output="compile: FAILED\nerror: expected ';'", is_error=True),
            None,
        ),
        ("same call three times", trajectory(edit(0), COMPILE, COMPILE, COMPILE), "repeated_loop"),
        ("same argument, keys reordered", trajectory(edit(0), edit(0), edit(0)), "repeated_loop"),
        ("a two-turn cycle three times", trajectory(*[edit(0), COMPILE] * 3), "repeated_loop"),
        ("a two-turn cycle twice", trajectory(*[edit(0), COMPILE] * 2), None),
    ],
)
def test_drop_reason(name: str, candidate: Trajectory, reason: str | None) -> None:
    assert drop_reason(candidate) == reason, name


def test_loop_description_names_the_window() -> None:
    assert find_loop(trajectory(*[edit(0), COMPILE] * 3).turns) == "turns 0-1 repeated 3 times"
    assert "3 times in a row" in find_loop(trajectory(COMPILE, COMPILE, COMPILE).turns)


def test_filter_counts_drops_by_reason_and_writes_sft_rows(tmp_path: Path) -> None:
    bad = [trajectory(("Read", {"path": "x"}), reward=-1), trajectory(edit(0), edit(0), edit(0))]
    result = filter_trajectories([GOOD, *bad, GOOD])
    assert result.reasons == [None, "reward", "repeated_loop", None]
    assert result.dropped == {"incomplete": 0, "reward": 1, "malformed_tool_call": 0, "repeated_loop": 1}
    assert result.summary() == "kept 2 of 4; dropped: reward 1, repeated_loop 1"

    pq = pytest.importorskip("pyarrow.parquet")
    path = write_sft([GOOD, *bad, GOOD], tmp_path / "rft.parquet")
    rows = pq.read_table(path).to_pylist()
    assert len(rows) == 2 and set(rows[0]) == {"messages", "tools", "task", "reward", "input_ids", "loss_mask"}
    messages = rows[0]["messages"]
    assert [m["role"] for m in messages[:4]] == ["system", "user", "assistant", "tool"]
    assert json.loads(messages[2]["tool_calls"][0]["function"]["arguments"]) == {"path": "model.py"}
    assert messages[3]["tool_call_id"] == messages[2]["tool_calls"][0]["id"]
    assert rows[0]["tools"] != TOOLS and drop_nulls(rows[0]["tools"]) == TOOLS  # parquet's struct union, undone


def test_verl_multiturn_sft_dataset_reads_the_parquet(tiny_tokenizer: Any, tmp_path: Path) -> None:
    pytest.importorskip("verl", reason="verl is not installed (pip install -e '.[rl]')")
    from cuda_agent.rl.sft_dataset import RFTDataset

    path = write_sft([GOOD], tmp_path / "rft.parquet")
    dataset = RFTDataset(str(path), tiny_tokenizer, {"max_length": 16384, "truncation": "right"})
    assert dataset.tools[0] == TOOLS  # parquet's null-filled union of tool properties is undone
    item = dataset[0]
    loss_tokens = item["input_ids"][item["loss_mask"].bool()]
    text = tiny_tokenizer.decode(loss_tokens)
    # Loss falls on the assistant turns (their text and tool calls), not on tool output or the prompt.
    assert '<tool_call>\n{"name": "Read", "arguments": {"path": "model.py"}}\n</tool_call>' in text
    assert "step 0" in text and "Done." in text and "skill" not in text and "ok" not in text


def test_repeated_rows_are_rendered_once_and_come_back_equal(
    tiny_tokenizer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("verl", reason="verl is not installed (pip install -e '.[rl]')")
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

    from cuda_agent.rl.sft_dataset import RFTDataset

    path = write_sft([GOOD, GOOD, GOOD], tmp_path / "rft.parquet")
    dataset = RFTDataset(str(path), tiny_tokenizer, {"max_length": 16384, "truncation": "right"})
    rendered = []
    render = MultiTurnSFTDataset.__getitem__
    monkeypatch.setattr(MultiTurnSFTDataset, "__getitem__", lambda self, i: rendered.append(i) or render(self, i))
    items = [dataset[i] for i in (0, 1, 2, 0)]
    assert rendered == [0]  # verl's per-message rendering ran for the first row only
    assert all(torch.equal(item[k], items[0][k]) for item in items for k in items[0])
    items[0]["loss_mask"][:] = 7  # a caller's in-place change does not reach the kept row
    assert not torch.equal(dataset[1]["loss_mask"], items[0]["loss_mask"])


def test_rft_data_command_filters_collected_episodes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pyarrow")
    from cuda_agent.agent import TrajectoryWriter
    from cuda_agent.cli import main

    rollouts = tmp_path / "rollouts"
    for name, episode in [("a", GOOD), ("b", trajectory(("Read", {"path": "x"}), reward=-1)), ("c", GOOD)]:
        with TrajectoryWriter(rollouts / name / "run" / "trajectory.jsonl", episode.task, "m", episode.prompt) as w:
            for step in episode.turns:
                w.append(step)
            w.finish(reward=episode.reward, exit_status="finished", terminated=True)
    (rollouts / "d" / "run").mkdir(parents=True)
    (rollouts / "d" / "run" / "trajectory.jsonl").write_text("")  # an episode that died before its header

    out = tmp_path / "rft.parquet"
    assert main(["train", "rft-data", "--rollouts", str(rollouts), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert f"kept 2 of 3; dropped: reward 1; wrote {out}" in captured.out and "cannot read" in captured.err
    assert main(["train", "rft-data", "--rollouts", str(tmp_path / "none"), "--out", str(out)]) == 2


def test_rft_trains_on_the_rollouts_exact_tokens(tiny_tokenizer: Any, tmp_path: Path) -> None:
    """A rolled-out episode's ids are used as they are, not re-rendered (the template would print other ids)."""
    pytest.importorskip("verl", reason="verl is not installed (pip install -e '.[rl]')")
    from cuda_agent.rl.sft_dataset import RFTDataset

    # As sampled: tool-call JSON with other spacing than the chat template renders.
    sampled = tiny_tokenizer.encode('<tool_call>\n{"name":"Read","arguments":{"path":"model.py"}}\n</tool_call>')
    tool = tiny_tokenizer.encode("<|im_end|>\n<|im_start|>user\n<tool_response>ok</tool_response>")
    record = TokenRecord(
        prompt_ids=[5, 6, 7],
        response_ids=sampled + tool + [9],
        response_mask=[1] * len(sampled) + [0] * len(tool) + [1],
        reward=2,
    )
    path = write_sft([GOOD, GOOD], tmp_path / "rft.parquet", [record, None])
    dataset = RFTDataset(str(path), tiny_tokenizer, {"max_length": 16384, "truncation": "right"})
    exact, rendered = dataset[0], dataset[1]
    n = len(record.prompt_ids) + len(record.response_ids)
    assert exact["input_ids"][:n].tolist() == record.prompt_ids + record.response_ids
    assert exact["loss_mask"][:n].tolist() == [0, 0, 0, *record.response_mask] and exact["loss_mask"][n:].sum() == 0
    assert exact["attention_mask"].sum() == n
    assert rendered["input_ids"].tolist() != exact["input_ids"].tolist()  # the row without tokens is rendered


def test_collected_episodes_become_rft_and_critic_replay_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("pyarrow")
    from cuda_agent.agent import TrajectoryWriter
    from cuda_agent.cli import main

    rollouts = tmp_path / "rollouts"
    for name, episode, reward in [("a", GOOD, 2.0), ("b", trajectory(("Read", {"path": "x"}), reward=-1), -1.0)]:
        folder = rollouts / name / "run"
        with TrajectoryWriter(folder / "trajectory.jsonl", episode.task, "m", episode.prompt) as w:
            for step in episode.turns:
                w.append(step)
            w.finish(reward=episode.reward, exit_status="finished", terminated=True)
        TokenRecord(prompt_ids=[1, 2], response_ids=[3, 4], response_mask=[1, 1], reward=reward).write(folder)
    out = tmp_path / "replay.parquet"
    assert main(["train", "critic-data", "--rollouts", str(rollouts), "--out", str(out)]) == 0
    import pyarrow.parquet as pq

    rows = pq.read_table(out).to_pylist()
    assert [r["extra_info"]["tokens"] for r in rows] == [str(rollouts / n / "run") for n in ("a", "b")]
    assert {r["agent_name"] for r in rows} == {"cuda_agent_replay"}  # the value model also learns from failures
    rft = tmp_path / "rft.parquet"
    assert main(["train", "rft-data", "--rollouts", str(rollouts), "--out", str(rft)]) == 0
    assert pq.read_table(rft).to_pylist()[0]["input_ids"] == [1, 2, 3, 4]


def test_rft_data_adds_extra_sft_rows_and_needs_some_row(tmp_path: Path) -> None:
    """`train all`'s rft-data stage: the kept episodes plus extra SFT rows (e.g. the curriculum's answers)."""
    pq = pytest.importorskip("pyarrow.parquet")
    from cuda_agent.errors import ConfigError

    failed = Collected(path=tmp_path / "t.jsonl", trajectory=trajectory(("Read", {"path": "x"}), reward=-1))
    extra = write_sft([GOOD], tmp_path / "extra.parquet")
    with pytest.raises(ConfigError, match="nothing to fine-tune on"):
        write_rft_data([failed], tmp_path / "none.parquet")
    result = write_rft_data([failed], tmp_path / "rft.parquet", extra_sft=[extra])
    assert result.summary() == "kept 0 of 1; dropped: reward 1; 1 extra rows"
    [row] = pq.read_table(tmp_path / "rft.parquet").to_pylist()
    assert row["messages"] == pq.read_table(extra).to_pylist()[0]["messages"]


def test_the_agentic_curriculums_sft_rows_become_the_critic_warmups_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """sft.parquet as `train agentic` writes it (nulls dropped, an episode `copies` times, one row without tokens)
    replays through the warm-up's loop to the episodes' exact tokens and rewards, each distinct episode once."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from cuda_agent.cli import main
    from cuda_agent.errors import ConfigError
    from cuda_agent.rl.critic_warmup import replay_record
    from cuda_agent.rl.rft import sft_row, write_replay_from_sft

    passed = TokenRecord(prompt_ids=[1, 2, 3], response_ids=[4, 5, 6, 7], response_mask=[1, 0, 0, 1], reward=3.0)
    failed = TokenRecord(prompt_ids=[1, 2], response_ids=[8, 9], response_mask=[1, 1], reward=-1.0)
    fast, give_up = GOOD.model_copy(update={"reward": 3.0}), GOOD.model_copy(update={"reward": -1.0})
    rows = [sft_row(fast, passed), sft_row(fast, passed), sft_row(give_up, failed), sft_row(GOOD)]
    sft = tmp_path / "data" / "sft.parquet"
    sft.parent.mkdir()
    pq.write_table(pa.Table.from_pylist([drop_nulls(r) for r in rows]), sft)
    out = tmp_path / "critic_data" / "replay.parquet"
    assert main(["train", "critic-data", "--from-sft", str(sft), "--out", str(out)]) == 0
    assert "wrote 2 replay rows" in capsys.readouterr().out

    replay = pq.read_table(out).to_pylist()
    assert [replay_record(r, 8, 100) for r in replay] == [passed, failed]
    assert [r["prompt"] for r in replay] == [[{"role": "user", "content": "task"}]] * 2  # the task line
    assert {r["agent_name"] for r in replay} == {"cuda_agent_replay"}
    assert all(Path(r["extra_info"]["tokens"]).is_absolute() for r in replay)

    bad = sft_row(fast, passed) | {"loss_mask": [0] * 7}
    pq.write_table(pa.Table.from_pylist([drop_nulls(bad)]), sft)
    with pytest.raises(ConfigError, match="0 model tokens"):
        write_replay_from_sft(sft, out)
    pq.write_table(pa.Table.from_pylist([drop_nulls(sft_row(GOOD))]), sft)
    with pytest.raises(ConfigError, match="no row of"):
        write_replay_from_sft(sft, out)
