"""Fixtures for the verl adapter tests: a tiny Qwen-style tokenizer built here (no downloads)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_tokenizer(tmp_path_factory: pytest.TempPathFactory):
    """A byte-level BPE tokenizer with ChatML specials and the Hermes tool-call template of the backend tests."""
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    from cuda_agent.agent.models.tool_text import CHATML_TOOLS_TEMPLATE

    alphabet = sorted(tokenizers.pre_tokenizers.ByteLevel.alphabet())
    tok = tokenizers.Tokenizer(tokenizers.models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    tok.add_special_tokens(["<|im_start|>", "<|im_end|>", "<|endoftext|>"])
    tok.add_tokens(["<tool_call>", "</tool_call>"])
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", chat_template=CHATML_TOOLS_TEMPLATE
    )
    root: Path = tmp_path_factory.mktemp("tiny-tokenizer")
    fast.save_pretrained(root)
    return transformers.AutoTokenizer.from_pretrained(root)


@pytest.fixture(scope="session")
def tiny_model_dir(tiny_tokenizer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local model folder verl's config checks can read: the tiny tokenizer and a one-layer Qwen2 config (no weights)."""
    transformers = pytest.importorskip("transformers")
    root: Path = tmp_path_factory.mktemp("tiny-model")
    tiny_tokenizer.save_pretrained(root)
    config = transformers.Qwen2Config(
        vocab_size=len(tiny_tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=131_072,
        architectures=["Qwen2ForCausalLM"],
    )
    config.save_pretrained(root)
    return root
