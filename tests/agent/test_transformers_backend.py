"""The transformers backend on a tiny randomly initialised Qwen2 model and a tokenizer built here (no downloads)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
torch = pytest.importorskip("torch")

from cuda_agent.agent.models import get_model  # noqa: E402
from cuda_agent.agent.models.tool_text import CHATML_TOOLS_TEMPLATE  # noqa: E402
from cuda_agent.agent.models.transformers_local import TransformersModel  # noqa: E402
from cuda_agent.errors import ModelError  # noqa: E402

TOOLS = [
    {"type": "function", "function": {"name": "Read", "description": "Read a file", "parameters": {"type": "object"}}}
]
MESSAGES = [
    {"role": "system", "content": "You write kernels."},
    {"role": "user", "content": "Read model.py"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "Read", "arguments": '{"path": "model.py"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_0", "content": "     1\timport torch"},
]


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tiny-qwen")
    alphabet = sorted(tokenizers.pre_tokenizers.ByteLevel.alphabet())
    tok = tokenizers.Tokenizer(tokenizers.models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    tok.add_special_tokens(["<|im_start|>", "<|im_end|>", "<|endoftext|>"])
    tok.add_tokens(["<tool_call>", "</tool_call>"])
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", chat_template=CHATML_TOOLS_TEMPLATE
    )
    fast.save_pretrained(root)
    config = transformers.Qwen2Config(
        vocab_size=len(fast),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    transformers.Qwen2ForCausalLM(config).save_pretrained(root)
    return root


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path) -> TransformersModel:
    return get_model(f"hf:{tiny_model_dir}", device="cpu", temperature=0, max_new_tokens=12)


def test_prompt_renders_tools_and_calls_with_dict_arguments(model: TransformersModel) -> None:
    prompt = model.render(MESSAGES, TOOLS)
    assert '"name": "Read", "description": "Read a file"' in prompt
    assert '<tool_call>\n{"name": "Read", "arguments": {"path": "model.py"}}\n</tool_call>' in prompt
    assert prompt.endswith("<|im_start|>assistant\n")
    assert model.count_tokens(MESSAGES, TOOLS) == len(model.encode(prompt))


def test_greedy_turn_returns_token_ids_and_their_logprobs(model: TransformersModel) -> None:
    turn = model.complete(MESSAGES, TOOLS)
    assert turn.prompt_tokens == model.count_tokens(MESSAGES, TOOLS)
    assert turn.token_ids is not None and turn.logprobs is not None
    assert 1 <= len(turn.token_ids) == len(turn.logprobs) == turn.completion_tokens <= 12
    assert turn.finish_reason in {"length", "stop", "tool_calls"}
    prompt_ids = model.encode(model.render(MESSAGES, TOOLS))
    with torch.no_grad():
        logits = model.model(torch.tensor([prompt_ids + turn.token_ids])).logits[0].float()
    expected = torch.log_softmax(logits[len(prompt_ids) - 1 : -1], dim=-1)
    expected = expected.gather(1, torch.tensor(turn.token_ids)[:, None]).squeeze(1)
    assert torch.allclose(torch.tensor(turn.logprobs), expected, atol=1e-4)
    assert model.complete(MESSAGES, TOOLS).token_ids == turn.token_ids  # greedy is repeatable


def test_sampling_draws_valid_tokens(tiny_model_dir: Path) -> None:
    sampler = TransformersModel(tiny_model_dir, device="cpu", temperature=1.0, top_p=0.9, max_new_tokens=6, seed=1)
    turn = sampler.complete(MESSAGES[:2], TOOLS)
    assert len(turn.token_ids) == len(turn.logprobs) <= 6
    assert all(lp <= 0 and math.isfinite(lp) for lp in turn.logprobs)


def test_generated_tool_calls_are_parsed(model: TransformersModel) -> None:
    text = 'Looking.<tool_call>\n{"name": "Read", "arguments": {"path": "model.py"}}\n</tool_call>'
    ids = model.encode(text) + [model.tokenizer.eos_token_id]
    turn = model.decode([1, 2, 3], ids, None)
    assert turn.content == "Looking." and turn.finish_reason == "tool_calls"
    assert [(c.name, json.loads(c.arguments), c.error) for c in turn.tool_calls] == [
        ("Read", {"path": "model.py"}, None)
    ]
    cut = model.decode([1], model.encode('<tool_call>{"name": "Read", "argu'), None)
    assert cut.finish_reason == "length" and "not closed" in cut.tool_calls[0].error


def test_missing_model_folder_is_a_model_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="cannot load a transformers model"):
        TransformersModel(tmp_path / "nothing-here", device="cpu")
