"""The agentic learning demo's CPU path end to end: bench/agentic_gpu.sh's data and train calls with DEVICE=cpu.

The same phases as on the GPU (scripted episodes played through CudaAgentLoop, verl's SFT on them, the
critic from the SFT model warmed up on those episodes replayed with the actor frozen, agentic PPO from
the warmed critic judged by a `cuda-agent serve`, the held-out and training tasks validated before and
after, the report) with a tiny random Llama in SmolLM2's tokens and the smallest sizes: the `give_up`
script on the 8 training tasks, 2 SFT steps, 2 warm-up steps, 1 PPO step of 2 episodes, the 12 tasks
validated once before and once after (~20 minutes on 2 busy cores, most of it PPO's call).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.rl.test_agentic_ppo_cpu import run_bench_script, smollm2_tokenizer  # noqa: F401  (the fixture)

ROOT = Path(__file__).resolve().parents[2]


def _call(phase: str, env: dict[str, str]) -> str:
    return run_bench_script(["bash", "bench/agentic_gpu.sh", phase], env, timeout_s=1500)


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.timeout(1800)  # four verl launches on the CPU: over the suite's 900 s per test
def test_the_demo_scripts_cpu_path_runs_data_sft_critic_warmup_and_ppo_with_held_out_validation(
    tmp_path: Path,
    smollm2_tokenizer: Path,  # noqa: F811
) -> None:
    work = tmp_path / "work"
    env = {
        **os.environ,
        "DEVICE": "cpu",
        "WORK": str(work),
        "OUT": str(tmp_path / "out"),
        "TOKENIZER": str(smollm2_tokenizer),
        "SCRIPTS": "give_up",
        "PARALLEL": "2",
        "SFT_STEPS": "2",
        "CRITIC_STEPS": "2",
        "STEPS": "1",
        "BATCH": "1",
        "N": "2",
        "VAL_N": "1",
        "MAX_TURNS": "2",
        "BUDGET_S": "1400",
        "PORT": "8791",
        "CUDA_AGENT_CACHE": str(tmp_path / "cache"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    env.pop("RAY_ADDRESS", None)
    data = _call("data", env)
    assert "== 8 scripted episodes: ('give_up', 'compile_error', -1.0) 8" in data
    train_tasks = set(pq.read_table(work / "data" / "rl.parquet").to_pandas()["extra_info"].map(lambda e: e["task"]))
    held_out = set(pq.read_table(work / "data" / "heldout.parquet").to_pandas()["extra_info"].map(lambda e: e["task"]))
    assert len(train_tasks) == 8 and len(held_out) == 4 and not train_tasks & held_out
    assert (tmp_path / "out" / "agentic_data.tar").is_file()

    train = _call("train", env)
    assert "== SFT exit 0" in train and "2 steps" in train
    assert "== critic warm-up exit 0" in train and f"== PPO's critic: {work / 'critic_warm'}" in train
    warmup = [json.loads(line) for line in (work / "results" / "critic" / "steps.jsonl").read_text().splitlines()]
    assert [s["step"] for s in warmup] == [1, 2] and all(s["critic_loss"] is not None for s in warmup)
    assert "== critic warm-up value loss by step: 1: " in train
    assert _max_difference(work / "critic", work / "critic_warm") > 0  # the value model learnt something
    assert "validation at step 0" in train and "validation at step 1" in train  # before and after
    run = work / "results" / "ppo_s0"  # SEED=0
    steps = [json.loads(line) for line in (run / "steps.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [0, 1]  # step 0: the validation before training
    assert steps[1]["reward_mean"] is not None and steps[1]["our_failures"] == 0
    assert steps[1]["entropy"] is not None and steps[1]["judgements_fresh"] is not None
    assert (run / "report.html").is_file() and (tmp_path / "out" / "agentic_gpu.tar").is_file()
    # verl's dumps: the held-out and the training tasks validated before and after, the step's episodes.
    assert sorted(p.name for p in (run / "validation_data").glob("*.jsonl")) == ["0.jsonl", "1.jsonl"]
    assert (run / "rollout_data" / "1.jsonl").is_file()
    report = work / "results" / "report"
    episodes = [json.loads(line) for line in (report / "episodes.jsonl").read_text().splitlines()]
    validated = [e for e in episodes if e["kind"] == "validation"]
    assert len(validated) == 2 * 12 and {e["split"] for e in validated} == {"held_out", "train"}  # VAL_N=1
    assert all(e["turns"] is not None and e["tool_call_turns"] is not None for e in episodes)
    page = (report / "report.md").read_text()
    for split, step in (("held-out", 0), ("held-out", 1), ("training", 0), ("training", 1)):
        assert f"| ppo_s0 | {split} tasks | {step} |" in page
    assert (report / "steps_ppo_s0.png").is_file()


def _max_difference(before: Path, after: Path) -> float:
    from safetensors.torch import load_file

    first, second = load_file(before / "model.safetensors"), load_file(after / "model.safetensors")
    assert first.keys() == second.keys()
    return max((second[k] - first[k]).abs().max().item() for k in first)


def test_a_detached_phase_is_followed_across_calls_and_its_exit_comes_back(tmp_path: Path) -> None:
    """DETACH=1 starts the phase in a session of its own and follows it; a later `follow` call reports how it ended,
    with its log lines shown once and its results packed into that call's $OUT."""
    import subprocess

    work, env = tmp_path / "work", {**os.environ, "DEVICE": "cpu", "FOLLOW_S": "30"}

    def call(phase: str, out: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "bench/agentic_gpu.sh", phase],
            cwd=ROOT,
            env={**env, "WORK": str(work), "OUT": str(tmp_path / out), **extra},
            capture_output=True,
            text=True,
            timeout=120,
        )

    alone = call("follow", "out0")
    assert alone.returncode == 2 and "start one with DETACH=1" in alone.stdout
    started = call("train", "out1", DETACH="1")  # no data: the detached phase ends at once with its exit 2
    assert started.returncode == 2, started.stdout + started.stderr
    assert "no " in started.stdout and "sft.parquet" in started.stdout
    assert "the detached run ended (train: exit 2)" in started.stdout
    assert (tmp_path / "out1" / "agentic_gpu.tar").is_file()
    followed = call("follow", "out2")
    assert followed.returncode == 2 and "sft.parquet" not in followed.stdout  # each line is shown once
    assert "the detached run ended (train: exit 2)" in followed.stdout
    assert (tmp_path / "out2" / "agentic_gpu.tar").is_file()
