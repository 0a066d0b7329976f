"""A critic folder for verl from any causal-LM folder (SmolLM2, Qwen, Llama...): its body, a fresh 1-label head.

Why: verl's `load_valuehead_model` loads the critic with `AutoModelForTokenClassification` and always asks
for `attn_implementation="flash_attention_2"`; where flash-attn is missing (our GPU image, every CPU) that
load fails and verl asks for trl instead. The folder written here carries its own model class
(`modeling_sdpa_critic.py`, loaded with `critic.model.trust_remote_code=true`), the architecture's token
classification class with sdpa in flash-attn's place, as bench/tiny_model.py's critic does for Qwen2.

    python -m cuda_agent.rl.critic_model MODEL_DIR OUT_DIR
"""

from __future__ import annotations

import argparse
from pathlib import Path

from cuda_agent.errors import ConfigError

CRITIC_CODE = '''"""A critic: {base} with one label, on sdpa where flash-attn is not installed (cuda_agent.rl.critic_model)."""

import importlib.util

from transformers import {base}


class SdpaCritic({base}):
    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        # verl's load_valuehead_model always asks for flash_attention_2.
        if kwargs.get("attn_implementation") == "flash_attention_2" and importlib.util.find_spec("flash_attn") is None:
            kwargs["attn_implementation"] = "sdpa"
        return super().from_pretrained(*args, **kwargs)
'''


def write_critic(model_dir: Path, out: Path) -> Path:
    """Write a critic folder at `out` from the causal LM at `model_dir` (module docstring); returns `out`.

    Raises:
        ConfigError: the architecture has no token classification class in transformers.
    """
    import transformers

    config = transformers.AutoConfig.from_pretrained(model_dir)
    base = f"{type(config).__name__.removesuffix('Config')}ForTokenClassification"
    if not hasattr(transformers, base):
        raise ConfigError(f"transformers has no {base} for {model_dir}; give the critic a folder of its own")
    config.num_labels = 1
    config.auto_map = {"AutoModelForTokenClassification": "modeling_sdpa_critic.SdpaCritic"}
    model = getattr(transformers, base).from_pretrained(model_dir, config=config)  # the LM head is dropped
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    transformers.AutoTokenizer.from_pretrained(model_dir).save_pretrained(out)
    (out / "modeling_sdpa_critic.py").write_text(CRITIC_CODE.format(base=base))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A verl critic folder from a causal-LM folder.")
    parser.add_argument("model", type=Path, help="the causal LM's folder")
    parser.add_argument("out", type=Path, help="the critic folder to write")
    args = parser.parse_args(argv)
    write_critic(args.model, args.out)


if __name__ == "__main__":
    main()
