"""bench/chain_state.py: the chain's carried state keeps what the stages still to run read, and only that."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.chain_state import READS, excludes  # noqa: E402

ARTIFACTS = {
    "single-turn": "run/single_turn/hf",
    "collect": "run/collect/rollouts",
    "rft-data": "run/rft_data/rft.parquet",
    "rft": "run/rft/hf",
    "critic-data": "run/critic_data/replay.parquet",
    "critic-warmup": "run/critic_warmup/hf",
    "agentic-ppo": "run/agentic_ppo/hf",
}


def _work(tmp_path: Path, done: list[str], started: str | None) -> Path:
    """A chain's folder as bench/chain_gpu.sh leaves it: tiny models, each stage's checkpoints and artifact."""
    work = tmp_path / "work"
    files = ["tiny/actor/model.safetensors", "tiny/critic/model.safetensors", "pipeline.yaml"]
    for stage in READS:
        folder = f"run/{stage.replace('-', '_')}"
        files.append(f"{folder}/metrics.0.jsonl")
        if stage in (*done, started) and stage not in ("rft-data", "critic-data"):
            step = f"{folder}/checkpoints/global_step_2"
            files += [
                f"{folder}/checkpoints/latest_checkpointed_iteration.txt",
                f"{step}/actor/model_world_size_1_rank_0.pt",
            ]
            files += [f"{step}/actor/optim_world_size_1_rank_0.pt", f"{step}/actor/huggingface/model.safetensors"]
            files += [f"{step}/critic/model_world_size_1_rank_0.pt"]
        if stage in done:
            artifact = ARTIFACTS[stage]
            files.append(artifact if artifact.endswith(".parquet") else f"{artifact}/model.safetensors")
    for name in files:
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(name)
    stages = {s: {"status": "done", "artifact": str(work / ARTIFACTS[s])} for s in done}
    if started:
        stages[started] = {"status": "started"}
    (work / "run" / "manifest.json").write_text(json.dumps({"stages": stages}))
    return work


def _kept(work: Path, tmp_path: Path) -> set[str]:
    """The state's members, tarred as chain_gpu.sh tars it."""
    state = tmp_path / "state.tar"
    subprocess.run(
        ["tar", "-cf", str(state), *excludes(work), "./tiny", "./run", "./pipeline.yaml"], cwd=work, check=True
    )
    with tarfile.open(state) as tar:
        return {m.name.removeprefix("./") for m in tar.getmembers() if m.isfile()}


def test_cut_during_the_critic_warmup_keeps_its_inputs_and_its_own_checkpoints(tmp_path: Path) -> None:
    work = _work(tmp_path, ["single-turn", "collect", "rft-data", "rft", "critic-data"], "critic-warmup")
    kept = _kept(work, tmp_path)
    warmup = "run/critic_warmup/checkpoints/global_step_2"
    assert {"tiny/critic/model.safetensors", "run/rft/hf/model.safetensors", "run/critic_data/replay.parquet"} <= kept
    assert {f"{warmup}/actor/optim_world_size_1_rank_0.pt", f"{warmup}/critic/model_world_size_1_rank_0.pt"} <= kept
    # read by nothing still to run: the first model, the first stages' artifacts, finished stages' checkpoints
    gone = {"tiny/actor/model.safetensors", "run/single_turn/hf/model.safetensors", "run/rft_data/rft.parquet"}
    gone |= {
        "run/collect/rollouts/model.safetensors",
        "run/rft/checkpoints/global_step_2/actor/huggingface/model.safetensors",
    }
    assert not gone & kept


def test_cut_during_agentic_ppo_keeps_the_checks_inputs_and_no_optimizer_of_the_warmup(tmp_path: Path) -> None:
    done = ["single-turn", "collect", "rft-data", "rft", "critic-data", "critic-warmup"]
    kept = _kept(_work(tmp_path, done, "agentic-ppo"), tmp_path)
    warmup = "run/critic_warmup/checkpoints"
    assert {"run/rft/hf/model.safetensors", "run/critic_warmup/hf/model.safetensors"} <= kept  # agentic PPO's
    assert {
        f"{warmup}/latest_checkpointed_iteration.txt",
        f"{warmup}/global_step_2/actor/huggingface/model.safetensors",
    } <= kept
    assert "run/agentic_ppo/checkpoints/global_step_2/actor/optim_world_size_1_rank_0.pt" in kept  # it resumes
    assert not {n for n in kept if n.startswith(f"{warmup}/") and (n.endswith(".pt") or "/critic/" in n)}
    assert not {n for n in kept if n.startswith("tiny/")}
    assert all(
        n.endswith(".jsonl")
        or n.startswith(("run/rft/", "run/critic_warmup/", "run/agentic_ppo/"))
        or n in ("pipeline.yaml", "run/manifest.json")
        for n in kept
    ), kept


@pytest.mark.parametrize("done", [[], ["single-turn"]])
def test_early_in_the_chain_nothing_a_later_stage_reads_is_left_out(tmp_path: Path, done: list[str]) -> None:
    kept = _kept(_work(tmp_path, done, "collect" if done else "single-turn"), tmp_path)
    assert "tiny/critic/model.safetensors" in kept  # the critic warm-up reads it much later
    assert ("run/single_turn/hf/model.safetensors" in kept) == bool(done)
