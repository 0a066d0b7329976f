"""bench/tiny_model.py's critic survives verl's hf_model checkpoint (the chain hands it on as a Hugging Face folder).

verl's FSDP checkpoint manager (0.9.1, `save_checkpoint` with `hf_model` in save_contents) calls transformers'
`custom_object_save` on the live model, then builds an empty model `from_config` and `save_pretrained`s it; those
are the calls made here, on the real critic the script writes.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]


def test_the_tiny_critic_saves_as_verl_saves_it_and_loads_back(tmp_path: Path) -> None:
    from transformers import AutoModelForTokenClassification
    from transformers.dynamic_module_utils import custom_object_save

    spec = importlib.util.spec_from_file_location("tiny_model", ROOT / "bench" / "tiny_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _, critic_dir = module.build(tmp_path / "tiny", vocab_size=512, hidden=16, layers=1, seed=0)

    live = AutoModelForTokenClassification.from_pretrained(critic_dir, trust_remote_code=True)
    hf = tmp_path / "global_step_1" / "critic" / "huggingface"
    hf.mkdir(parents=True)
    custom_object_save(live, hf, config=live.config)  # verl: beside the config and tokenizer it saves
    empty = AutoModelForTokenClassification.from_config(live.config, trust_remote_code=True)
    empty.save_pretrained(hf, state_dict=live.state_dict())  # verl: the hf_model copy (failed: a None auto_map key)

    assert json.loads((hf / "config.json").read_text())["auto_map"] == {
        "AutoModelForTokenClassification": "modeling_tiny_critic.TinyCritic"
    }
    again = AutoModelForTokenClassification.from_pretrained(hf, trust_remote_code=True)
    assert type(again).__name__ == "TinyCritic"
    assert all((again.state_dict()[k] == v).all() for k, v in live.state_dict().items())
