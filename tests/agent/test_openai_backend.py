"""The OpenAI-compatible backend end to end against a real local HTTP server, and tools answering its calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.agent.models import OpenAIModel, get_model
from cuda_agent.agent.tools import build_toolset
from cuda_agent.errors import ConfigError, ContextLengthError, ModelError
from tests.agent.conftest import is_editable
from tests.agent.fake_openai import FakeOpenAI, Reply, completion

PROMPT = [{"role": "system", "content": "You write CUDA kernels."}, {"role": "user", "content": "Make it fast."}]


def fast_model(url: str, **options: object) -> OpenAIModel:
    return OpenAIModel(url, api_key="sk-test", backoff_s=0.01, **options)


def test_scripted_tool_calls_drive_real_tools(fake_openai: FakeOpenAI, workspace: Path) -> None:
    fake_openai.replies = [
        completion("Let me look.", [{"name": "Read", "arguments": '{"path": "model.py"}'}]),
        completion("", [{"name": "Write", "arguments": json.dumps({"path": "kernels/k.cu", "content": "// k\n"})}]),
        completion("Done."),
    ]
    model = get_model(fake_openai.url, api_key="sk-test", temperature=0.6, max_tokens=512)
    assert model.name == f"{fake_openai.url} scripted-model"
    messages = list(PROMPT)
    with build_toolset(workspace, is_editable) as tools:
        for _ in range(3):
            turn = model.complete(messages, tools.schemas())
            messages.append(turn.message())
            messages.extend(tools.execute(call).to_message() for call in turn.tool_calls)
    assert turn.content == "Done." and turn.finish_reason == "stop" and not turn.tool_calls
    assert (workspace / "kernels" / "k.cu").read_text() == "// k\n"
    first, last = fake_openai.requests[0], fake_openai.requests[-1]
    assert first["model"] == "scripted-model" and first["temperature"] == 0.6 and first["max_tokens"] == 512
    assert [t["function"]["name"] for t in first["tools"]][:2] == ["Bash", "Read"]
    assert last["messages"][2]["tool_calls"][0]["function"]["name"] == "Read"
    assert last["messages"][3]["role"] == "tool" and "class Model" in last["messages"][3]["content"]
    assert fake_openai.headers[0]["Authorization"] == "Bearer sk-test"


def test_malformed_tool_calls_come_back_as_errors_the_model_can_read(fake_openai: FakeOpenAI, workspace: Path) -> None:
    fake_openai.replies = [
        completion(
            "",
            [
                {"name": "Edit", "arguments": '{"path": "model_new.py", "old_string": '},
                {"name": "rm_rf", "arguments": "{}"},
            ],
        ),
        completion("I will fix the call."),
    ]
    model = fast_model(fake_openai.url, model="m")
    turn = model.complete(PROMPT, [])
    assert [c.name for c in turn.tool_calls] == ["Edit", "rm_rf"]
    with build_toolset(workspace, is_editable) as tools:
        bad_json, unknown = (tools.execute(c) for c in turn.tool_calls)
    assert bad_json.is_error and "not valid JSON" in bad_json.output and "Bash, Read" in bad_json.output
    assert unknown.is_error and "no tool named 'rm_rf'" in unknown.output
    assert bad_json.to_message()["tool_call_id"] == "call_0"
    history = [*PROMPT, turn.message(), bad_json.to_message(), unknown.to_message()]
    assert model.complete(history, []).content == "I will fix the call."
    sent = fake_openai.requests[-1]["messages"][2]["tool_calls"]
    assert json.loads(sent[0]["function"]["arguments"]) == {"invalid_json": '{"path": "model_new.py", "old_string": '}
    assert sent[1]["function"]["arguments"] == "{}"
    assert fake_openai.requests[-1]["messages"][3] == bad_json.to_message()


def test_tool_calls_written_in_text_are_parsed(fake_openai: FakeOpenAI) -> None:
    text = 'Plan.\n<tool_call>\n{"name": "Bash", "arguments": {"command": "ls"}}\n</tool_call>'
    fake_openai.replies = [completion(text)]
    turn = fast_model(fake_openai.url, model="m").complete(PROMPT, [])
    assert turn.content == "Plan."
    assert [(c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [("Bash", {"command": "ls"})]


def test_logprobs_and_token_ids_are_requested_and_returned(fake_openai: FakeOpenAI) -> None:
    entries = [{"token": "token_id:11", "logprob": -0.5}, {"token": "token_id:7", "logprob": -1.25}]
    fake_openai.replies = [completion("hi", logprobs={"content": entries})]
    turn = fast_model(fake_openai.url, model="m", logprobs=True, token_ids=True).complete(PROMPT, [])
    assert turn.token_ids == [11, 7] and turn.logprobs == [-0.5, -1.25]
    assert turn.prompt_tokens == 100 and turn.completion_tokens == 20
    assert fake_openai.requests[0]["logprobs"] is True and fake_openai.requests[0]["return_token_ids"] is True


def test_retries_429_and_5xx_then_succeeds(fake_openai: FakeOpenAI) -> None:
    busy = Reply({"error": {"message": "slow down"}}, status=429, headers={"Retry-After": "0"})
    broken = Reply({"error": {"message": "boom"}}, status=503)
    fake_openai.replies = [busy, broken, completion("ok")]
    assert fast_model(fake_openai.url, model="m").complete(PROMPT, []).content == "ok"
    assert len(fake_openai.requests) == 3


def test_gives_up_after_the_retry_budget(fake_openai: FakeOpenAI) -> None:
    fake_openai.replies = [Reply({"error": {"message": "boom"}}, status=500) for _ in range(3)]
    with pytest.raises(ModelError, match="gave up after 3 tries"):
        fast_model(fake_openai.url, model="m", max_retries=2).complete(PROMPT, [])


@pytest.mark.parametrize(
    ("reply", "error", "match"),
    [
        (Reply({"error": {"message": "bad key"}}, status=401), ModelError, "check OPENAI_API_KEY"),
        (Reply({"error": {"message": "no such model"}}, status=404), ModelError, "check the base URL"),
        (
            Reply({"error": {"message": "This model's maximum context length is 131072 tokens"}}, status=400),
            ContextLengthError,
            "longer than the model's context",
        ),
        (Reply({"unexpected": True}), ModelError, "no choices"),
    ],
)
def test_refusals_raise_clear_errors(fake_openai: FakeOpenAI, reply: Reply, error: type, match: str) -> None:
    fake_openai.replies = [reply]
    with pytest.raises(error, match=match):
        fast_model(fake_openai.url, model="m").complete(PROMPT, [])
    assert len(fake_openai.requests) == 1


def test_unreachable_server_says_so() -> None:
    with pytest.raises(ModelError, match="could not reach"):
        OpenAIModel("http://127.0.0.1:9/v1", model="m", max_retries=1, backoff_s=0.01).complete(PROMPT, [])


def test_settings_come_from_the_environment(fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.url.removesuffix("/v1"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("CUDA_AGENT_MODEL", "from-env")
    fake_openai.replies = [completion("ok")]
    model = get_model("openai")
    assert model.complete(PROMPT, []).content == "ok"
    assert fake_openai.requests[0]["model"] == "from-env"
    assert fake_openai.headers[0]["Authorization"] == "Bearer sk-env"


@pytest.mark.parametrize("spec", ["ftp://host", "hf:", "nonsense", "replay:"])
def test_unknown_specs_are_config_errors(spec: str) -> None:
    with pytest.raises(ConfigError, match="unknown model spec"):
        get_model(spec)
