"""A tiny random Qwen2 policy and critic with a BPE tokenizer trained here: models for training runs without downloads.

Nothing is downloaded (the H200 has no network): a byte-level BPE is trained on SKILL.md, the demo
recordings, the learning demo's curriculum and the bundled solutions (so a workspace prompt is a few
thousand tokens, not one per byte), with ChatML specials and the Hermes tool-call chat template of our agent; then a randomly
initialised, seeded Qwen2 causal LM (the actor) and a Qwen2 token classifier with one label (the
critic, what verl's `load_valuehead_model` builds), both saved with the tokenizer.

verl's `load_valuehead_model` asks transformers for flash_attention_2, and flash-attn is installed
neither here nor on the H200: the critic folder therefore carries its own model class
(`modeling_tiny_critic.py`, loaded with `critic.model.trust_remote_code=true`) that takes sdpa
when flash-attn is missing. verl itself is not changed.

Usage (repository root):
    python bench/tiny_model.py --out /tmp/tiny            # /tmp/tiny/actor, /tmp/tiny/critic
    python bench/tiny_model.py --out /tmp/tiny --layers 2 --hidden 64 --vocab-size 4096 --seed 0
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CRITIC_CODE = '''"""The tiny critic: Qwen2 token classification that uses sdpa when flash-attn is not installed."""

import importlib.util

from transformers import Qwen2ForTokenClassification


class TinyCritic(Qwen2ForTokenClassification):
    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        # verl's load_valuehead_model always asks for flash_attention_2.
        if kwargs.get("attn_implementation") == "flash_attention_2" and importlib.util.find_spec("flash_attn") is None:
            kwargs["attn_implementation"] = "sdpa"
        return super().from_pretrained(*args, **kwargs)
'''
SOLUTIONS = [
    ROOT / "solutions" / "workspaces" / "examples_relu_cpu",
    ROOT / "solutions" / "workspaces" / "kernelbench_L1_19",
]


def training_texts() -> list[str]:
    """What the tokenizer learns from: SKILL.md, the curriculum, the demo recordings, the bundled solutions."""
    from cuda_agent.agent.demo import recording_path
    from cuda_agent.rl.curriculum import corpus
    from cuda_agent.workspace.layout import skill_text

    texts = [skill_text("cuda"), skill_text("cpu"), *corpus("cuda"), *corpus("cpu")]  # the learning demo's texts
    texts += [p.read_text() for p in sorted(recording_path("cpu").parent.glob("*.jsonl"))]
    for folder in SOLUTIONS:
        texts += [p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()]
    return texts


def build_tokenizer(out_dir: Path, vocab_size: int) -> Any:
    """A byte-level BPE trained on `training_texts()`, as a transformers fast tokenizer with our chat template."""
    import tokenizers
    import transformers
    from tokenizers import decoders, models, pre_tokenizers, trainers

    from cuda_agent.agent.models.tool_text import CHATML_TOOLS_TEMPLATE

    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(training_texts(), trainer)
    tok.add_tokens(["<tool_call>", "</tool_call>"])
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", chat_template=CHATML_TOOLS_TEMPLATE
    )
    fast.save_pretrained(out_dir)
    return transformers.AutoTokenizer.from_pretrained(out_dir)


def build(out: Path, vocab_size: int = 4096, hidden: int = 64, layers: int = 2, seed: int = 0) -> tuple[Path, Path]:
    """Write `out/actor` (Qwen2ForCausalLM) and `out/critic` (Qwen2ForTokenClassification, 1 label); returns both."""
    import torch
    import transformers

    tokenizer = build_tokenizer(out / "tokenizer", vocab_size)

    def config(**extra: Any) -> Any:
        return transformers.Qwen2Config(
            vocab_size=len(tokenizer),
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_hidden_layers=layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=131_072,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=None,
            tie_word_embeddings=False,
            **extra,
        )

    actor_dir, critic_dir = out / "actor", out / "critic"
    torch.manual_seed(seed)
    transformers.Qwen2ForCausalLM(config()).save_pretrained(actor_dir)
    torch.manual_seed(seed + 1)
    critic_config = config(num_labels=1)
    critic_config.auto_map = {"AutoModelForTokenClassification": "modeling_tiny_critic.TinyCritic"}
    transformers.Qwen2ForTokenClassification(critic_config).save_pretrained(critic_dir)
    (critic_dir / "modeling_tiny_critic.py").write_text(CRITIC_CODE)
    for folder in (actor_dir, critic_dir):
        tokenizer.save_pretrained(folder)
    return actor_dir, critic_dir


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for actor/, critic/ and tokenizer/")
    parser.add_argument("--vocab-size", type=int, default=4096)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    actor, critic = build(args.out, args.vocab_size, args.hidden, args.layers, args.seed)
    print(f"actor {actor}\ncritic {critic}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
