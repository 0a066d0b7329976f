"""A tiny random Llama in a real model's tokens: the policy of CPU wiring runs (nothing downloaded).

It takes the tokenizer folder of the model it stands in for (SmolLM2's, from
`python -m cuda_agent.agent.models.gguf DIR --tokenizer-only`), gives it the tools chat template
and saves a seeded 2-layer, hidden-64 Llama of that vocabulary beside it: the episodes it plays
are tokenized, templated and masked exactly as the real model's would be.

Usage (repository root):
    python bench/tiny_llama.py TOKENIZER_DIR OUT_DIR
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> None:
    import torch
    import transformers

    from cuda_agent.agent.models.gguf import chat_template_for_tools

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tokenizer", help="the real model's tokenizer folder")
    parser.add_argument("out", help="the folder to write (config, weights, tokenizer)")
    args = parser.parse_args(argv)
    tok = transformers.AutoTokenizer.from_pretrained(args.tokenizer)
    chat_template_for_tools(tok)
    config = transformers.LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(args.out)
    tok.save_pretrained(args.out)


if __name__ == "__main__":
    main()
