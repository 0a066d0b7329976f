"""`cuda-agent train data`: task sets as verl's RL parquet, read back by verl's own RLHFDataset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cuda_agent.cli import main
from cuda_agent.rl.data import default_out, rl_rows, write_rl_parquet
from cuda_agent.rl.recipes import bundled_recipe, load_recipe
from cuda_agent.rl.rollout import task_from_row
from cuda_agent.tasks import Catalog

pytest.importorskip("verl", reason="verl is not installed (pip install -e '.[rl]')")

from omegaconf import OmegaConf  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset  # noqa: E402


def read_with_verl(path: Path, tokenizer: Any, tmp_path: Path) -> RLHFDataset:
    # The tiny tokenizer has no merges (a token per byte), so the length filter gets room to spare.
    config = OmegaConf.create({"max_prompt_length": 100_000, "cache_dir": str(tmp_path / "cache")})
    return RLHFDataset([str(path)], tokenizer, config)


@pytest.mark.parametrize(("single_turn", "agent_name"), [(False, "cuda_agent"), (True, "single_turn_agent")])
def test_rows_load_in_verls_dataset_and_name_their_task(
    tiny_tokenizer: Any, tmp_path: Path, single_turn: bool, agent_name: str
) -> None:
    tasks = Catalog().tasks("examples")
    path = write_rl_parquet(rl_rows(tasks, single_turn=single_turn, device="cpu"), tmp_path / "rows.parquet")
    dataset = read_with_verl(path, tiny_tokenizer, tmp_path)
    assert len(dataset) == len(tasks)
    for index, task in enumerate(tasks):
        row = dataset[index]
        assert (row["agent_name"], row["data_source"], row["index"]) == (agent_name, "examples", index)
        assert row["reward_model"]["ground_truth"] == task.ref and row["extra_info"]["level"] is None
        assert task_from_row(row).code == task.code  # what the agent loop and compute_score will judge
        roles = [message["role"] for message in row["raw_prompt"]]
        assert roles == ["system", "user"]
        assert (task.code.strip() in row["raw_prompt"][1]["content"]) == single_turn


def test_train_data_command_writes_where_the_recipes_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["train", "data", "--suite", "kernelbench", "--levels", "1", "--single-turn", "--device", "cpu"]) == 0
    assert "wrote 100 single-turn (single_turn_agent) rows for cpu" in capsys.readouterr().out
    assert (tmp_path / "runs/data/kernelbench_L1_single_turn.parquet").is_file()
    expected = {
        "single-turn": (default_out("ops6k", True), default_out("kernelbench", True)),
        "critic-warmup": (Path("runs/critic_warmup/replay.parquet"),) * 2,  # `train critic-data` (collected episodes)
        "agentic-ppo": (default_out("ops6k", False), default_out("kernelbench", False)),
        "collect": (default_out("ops6k", False), default_out("ops6k", False)),
    }
    for stage, (train, val) in expected.items():
        overrides = load_recipe(bundled_recipe(stage)).overrides
        assert (overrides["data.train_files"], overrides["data.val_files"]) == (str(train), str(val)), stage


def test_kernelbench_rows_report_per_level(tmp_path: Path) -> None:
    tasks = [Catalog().resolve(ref) for ref in ("kernelbench/L1/19", "kernelbench/L3/1")]
    rows = rl_rows(tasks, single_turn=False, device="cuda")
    assert [row["data_source"] for row in rows] == ["kernelbench/L1", "kernelbench/L3"]
    assert [row["extra_info"]["level"] for row in rows] == [1, 3]


def test_triton_rows_ask_for_triton_kernels(tmp_path: Path) -> None:
    from cuda_agent.rl.single_turn import single_turn_messages
    from cuda_agent.workspace.layout import skill_text

    tasks = Catalog().tasks("examples")[:2]
    rows = rl_rows(tasks, single_turn=False, device="cpu", language="triton")
    assert [row["extra_info"]["language"] for row in rows] == ["triton", "triton"]
    assert rows[0]["prompt"][0]["content"] == skill_text("cpu", "triton")
    assert "@triton.jit" in rows[0]["prompt"][1]["content"]
    import pyarrow.parquet as pq

    path = write_rl_parquet(rows, tmp_path / "rows.parquet")
    assert pq.read_table(path).column("extra_info").to_pylist()[0]["language"] == "triton"
    single = rl_rows(tasks, single_turn=True, device="cuda", language="triton")
    assert single[0]["prompt"] == single_turn_messages(tasks[0], "cuda", "triton")
    assert single[0]["extra_info"]["language"] == "triton" and single[0]["agent_name"] == "single_turn_agent"
    assert default_out("ops6k", True, None, "triton").name == "ops6k_single_turn_triton.parquet"
