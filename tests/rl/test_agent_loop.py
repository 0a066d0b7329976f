"""The `cuda_agent` agent loop end to end: verl's AgentLoopBase with its real Continuous Token builder,
a scripted token server (mocked: it stands for vLLM/SGLang), our episode loop, workspace and tools,
and the real sandbox (LocalPool) judging examples/relu on the CPU."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("verl", reason="verl is not installed (pip install -e '.[rl]')")

from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import DictConfigWrap  # noqa: E402

from cuda_agent.agent import read_trajectory  # noqa: E402
from cuda_agent.agent.demo import scripted_turns  # noqa: E402
from cuda_agent.agent.models.base import ModelTurn  # noqa: E402
from cuda_agent.rl.agent_loop import CudaAgentLoop  # noqa: E402
from cuda_agent.rl.rft import TokenRecord  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LEGIT = ROOT / "solutions" / "workspaces" / "examples_relu_cpu"


def hermes_text(turn: ModelTurn) -> str:
    """What a Qwen-style model would generate for this turn (tool calls as <tool_call> blocks)."""
    blocks = [f'<tool_call>\n{{"name": "{c.name}", "arguments": {c.arguments}}}\n</tool_call>' for c in turn.tool_calls]
    return "\n".join([turn.content, *blocks]).strip() + "<|im_end|>"


class ScriptedTokenServer:
    """Stands in for verl's LLMServerClient: replies with the token ids of scripted turns, and fake log-probs."""

    def __init__(self, tokenizer: Any, script: list[ModelTurn], max_model_len: int | None = None) -> None:
        self.tokenizer, self.script, self.max_model_len = tokenizer, list(script), max_model_len
        self.prompts: list[list[int]] = []
        self.replies: list[tuple[list[int], list[float]]] = []
        self.asked: list[int] = []  # max_tokens of each request

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict, **kwargs: Any):
        assert sampling_params["max_tokens"] >= 1
        if self.max_model_len is not None and len(prompt_ids) + sampling_params["max_tokens"] > self.max_model_len:
            raise ValueError(f"prompt + max_tokens over max_model_len={self.max_model_len}")  # as vLLM refuses it
        self.prompts.append(list(prompt_ids))
        self.asked.append(sampling_params["max_tokens"])
        ids = self.tokenizer.encode(hermes_text(self.script[len(self.replies)]), add_special_tokens=False)
        logprobs = [-0.01 - 0.1 * (i % 7) for i in range(len(ids))]
        self.replies.append((ids, logprobs))
        return SimpleNamespace(token_ids=ids, log_probs=logprobs)


READ = ModelTurn(
    content="Reading.", tool_calls=[{"id": "c", "name": "Read", "arguments": json.dumps({"path": "model.py"})}]
)
"""A turn that reads a file: a model turn that changes nothing."""
DOUBLE = (
    "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
    "def get_inputs():\n    return [torch.randn(8)]\ndef get_init_inputs():\n    return []\n"
)
"""An inline task whose forward doubles its input."""


def make_loop(
    tokenizer: Any, server: ScriptedTokenServer, work_dir: Path, response_length: int, max_model_len: int | None = None
) -> CudaAgentLoop:
    rollout = {"prompt_length": 16384, "response_length": response_length, "multi_turn": {"max_assistant_turns": 50}}
    rollout["max_model_len"] = max_model_len
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": rollout}})
    return CudaAgentLoop(
        trainer_config=DictConfigWrap(config),
        server_manager=server,
        tokenizer=tokenizer,
        processor=None,
        dataset_cls=None,
        data_config=DictConfigWrap(OmegaConf.create({})),
        hf_model_type="qwen2",
        name="cuda_agent",
        work_dir=work_dir,
        device="cpu",
    )


@pytest.fixture
def script() -> list[ModelTurn]:
    kernels = {p.name: p.read_text() for p in (LEGIT / "kernels").iterdir()}
    turns = scripted_turns(kernels, (LEGIT / "model_new.py").read_text(), "cpu")
    # The demo's verify and profile turns take ~45 s here and add nothing the final judgement does not check.
    return [
        t
        for t in turns
        if not any("utils.verification" in c.arguments or "utils.profiling" in c.arguments for c in t.tool_calls)
    ]


@pytest.mark.integration
@pytest.mark.slow
def test_run_drives_a_judged_episode_with_aligned_tokens(
    tiny_tokenizer: Any, script: list[ModelTurn], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    server = ScriptedTokenServer(tiny_tokenizer, script)
    loop = make_loop(tiny_tokenizer, server, tmp_path / "rollouts", response_length=60_000)
    output = asyncio.run(loop.run({"temperature": 1.0}, extra_info={"task": "examples/relu"}))

    assert len(server.replies) == len(script)
    fields = output.extra_fields
    assert fields["verdict"] == "pass" and output.reward_score == fields["reward"] >= 1, fields["verdict_json"]
    assert read_trajectory(Path(fields["trajectory"])).reward == output.reward_score
    assert not (Path(fields["trajectory"]).parent / "tokens.json").exists()  # only collect saves them
    assert fields["exit_status"] == "finished" and fields["turns"] == len(script) and fields["judge_s"] > 0
    info = fields["reward_extra_info"]  # what verl aggregates into metrics (cuda_agent.rl.metrics)
    assert (info["score"], info["passed"], info["turns"]) == (output.reward_score, 1.0, len(script))
    assert "reward" not in info and output.metrics.compute_score == fields["judge_s"]

    # Never re-tokenised: each request extends the previous one by the reply's ids, then the tool messages' ids.
    expected_ids, expected_mask, expected_logprobs = [], [], []
    assert output.prompt_ids == server.prompts[0]
    for k, (ids, logprobs) in enumerate(server.replies):
        expected_ids += ids
        expected_mask += [1] * len(ids)
        expected_logprobs += logprobs
        if k + 1 < len(server.prompts):
            before, after = server.prompts[k], server.prompts[k + 1]
            assert after[: len(before) + len(ids)] == before + ids
            context = after[len(before) + len(ids) :]
            text = tiny_tokenizer.decode(context)
            assert text.startswith("\n<|im_start|>user\n<tool_response>") and text.endswith("<|im_start|>assistant\n")
            expected_ids += context
            expected_mask += [0] * len(context)
            expected_logprobs += [0.0] * len(context)
    assert output.response_ids == expected_ids
    assert output.response_mask == expected_mask
    assert output.response_logprobs == pytest.approx(expected_logprobs)
    assert len(output.response_ids) == len(output.response_mask) == len(output.response_logprobs)
    assert output.response_mask[-1] == 1  # the reward's token is the model's last
    assert output.as_dict()["rm_scores"][-1].item() == output.reward_score


def test_response_budget_ends_the_episode_and_caps_on_a_model_token(
    tiny_tokenizer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    server = ScriptedTokenServer(tiny_tokenizer, [READ] * 20)
    loop = make_loop(tiny_tokenizer, server, tmp_path / "rollouts", response_length=1200)
    loop.settings = loop.settings.model_copy(update={"save_tokens": True})  # as the collect recipe sets it
    output = asyncio.run(loop.run({}, code=DOUBLE, task="inline/double"))
    fields = output.extra_fields
    assert fields["exit_status"] == "context_length" and fields["clipped"] is True  # out of room: an over-long episode
    assert len(output.response_ids) == len(output.response_mask) <= 1200
    assert output.response_mask[-1] == 1 and output.reward_score == -1 == fields["reward"]
    assert fields["verdict"] != "pass"
    saved = TokenRecord.model_validate_json((Path(fields["trajectory"]).parent / "tokens.json").read_text())
    assert (saved.prompt_ids, saved.response_ids, saved.reward) == (output.prompt_ids, output.response_ids, -1.0)


def test_max_turn_tokens_caps_every_reply_the_episode_asks_for(
    tiny_tokenizer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    server = ScriptedTokenServer(tiny_tokenizer, [READ, READ, ModelTurn(content="Done.")])
    loop = make_loop(tiny_tokenizer, server, tmp_path / "rollouts", response_length=60_000)
    loop.settings = loop.settings.model_copy(update={"max_turn_tokens": 50})
    output = asyncio.run(loop.run({"max_tokens": 4096}, code=DOUBLE, task="inline/double"))
    assert server.asked == [50, 50, 50] and output.extra_fields["turns"] == 3  # not verl's 4096, nor the budget


def test_episode_that_outgrows_the_servers_context_is_clipped_scored_and_kept(
    tiny_tokenizer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rollout.max_model_len below prompt + response (our first prompt is not the row's, so it can be longer than
    data.max_prompt_length): the server would refuse the call past its context and the episode would be dropped as
    our failure; it ends as clipped instead, judged and rewarded as the paper scores clipped episodes."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    probe = ScriptedTokenServer(tiny_tokenizer, [])  # records the first prompt, then fails (a dropped sample)
    asyncio.run(make_loop(tiny_tokenizer, probe, tmp_path / "probe", 60_000).run({}, code=DOUBLE, task="inline/double"))
    context = len(probe.prompts[0]) + 1500  # room for a few turns, far below prompt_length + response_length
    server = ScriptedTokenServer(tiny_tokenizer, [READ] * 40, max_model_len=context)
    loop = make_loop(tiny_tokenizer, server, tmp_path / "rollouts", response_length=60_000, max_model_len=context)
    output = asyncio.run(loop.run({}, code=DOUBLE, task="inline/double"))
    fields = output.extra_fields
    assert fields["exit_status"] in ("context_length", "token_budget") and fields["clipped"] is True
    assert fields["reward_extra_info"]["our_failure"] == 0.0 and fields["reward_extra_info"]["clipped"] == 1.0
    assert output.reward_score == -1 == fields["reward"] and sum(output.response_mask) > 0  # kept, trained on
    assert len(output.prompt_ids) + len(output.response_ids) <= context


def test_import_keeps_the_settings_verl_loaded_from_the_agent_loop_yaml() -> None:
    import importlib

    from verl.experimental.agent_loop import agent_loop as verl_agent_loop

    import cuda_agent.rl.agent_loop as ours

    entry = {"_target_": "cuda_agent.rl.agent_loop.CudaAgentLoop", "work_dir": "/shared/rollouts", "device": "cpu"}
    saved = verl_agent_loop._agent_loop_registry.get("cuda_agent")
    verl_agent_loop._agent_loop_registry["cuda_agent"] = entry
    try:
        importlib.reload(ours)  # what hydra's first instantiate does after verl read the YAML
        assert verl_agent_loop._agent_loop_registry["cuda_agent"] == entry
    finally:
        verl_agent_loop._agent_loop_registry["cuda_agent"] = saved or {
            "_target_": "cuda_agent.rl.agent_loop.CudaAgentLoop"
        }


def test_our_failure_is_dropped_masked_and_counted(
    tiny_tokenizer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    server = ScriptedTokenServer(tiny_tokenizer, [ModelTurn(content="Done.")])
    loop = make_loop(tiny_tokenizer, server, tmp_path / "rollouts", response_length=4000)
    loop.settings = loop.settings.model_copy(update={"sandbox_url": "http://127.0.0.1:9"})  # nothing listens there
    output = asyncio.run(loop.run({}, extra_info={"task": "examples/relu"}))
    info = output.extra_fields["reward_extra_info"]
    assert info["our_failure"] == 1.0 and info["verdict"] == "dropped" and output.reward_score == 0.0
    assert output.response_ids and not any(output.response_mask)  # no token of it is trained on
    assert len(server.replies) == 1  # the episode ran; judging it failed on our side
