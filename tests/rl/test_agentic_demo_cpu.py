"""The agentic learning demo's CPU path end to end: bench/agentic_gpu.sh's data and train calls with DEVICE=cpu.

The same phases as on the GPU (scripted episodes played through CudaAgentLoop, verl's SFT on them, the
critic from the SFT model warmed up on those episodes replayed with the actor frozen, agentic PPO from
the warmed critic judged by a `cuda-agent serve`, the held-out tasks validated before and after, the
report) with a tiny random Llama in SmolLM2's tokens and the smallest sizes: the `give_up` script on
the 8 training tasks, 2 SFT steps, 2 warm-up steps, 1 PPO step of 2 episodes: 7.5 minutes on 2 cores
(2026-12-07: data 91 s, SFT 40 s, warm-up 98 s, PPO 200 s), 17 minutes while two other sessions loaded them.
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
    assert "validation at step 0" in train and "validation at step 1" in train  # held-out, before and after
    steps = [json.loads(line) for line in (work / "results" / "ppo" / "steps.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [0, 1]  # step 0: the validation before training
    assert steps[1]["reward_mean"] is not None and steps[1]["our_failures"] == 0
    assert (work / "results" / "ppo" / "report.html").is_file()
    assert (tmp_path / "out" / "agentic_gpu.tar").is_file()


def _max_difference(before: Path, after: Path) -> float:
    from safetensors.torch import load_file

    first, second = load_file(before / "model.safetensors"), load_file(after / "model.safetensors")
    assert first.keys() == second.keys()
    return max((second[k] - first[k]).abs().max().item() for k in first)
