"""A verl critic folder from a causal LM (cuda_agent.rl.critic_model)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("verl", reason="verl is not installed (pip install -e '.[rl]')")


def test_a_critic_folder_from_a_causal_lm_loads_as_verl_loads_critics(tiny_model_dir: Path, tmp_path: Path) -> None:
    """verl asks for flash-attn when it loads a critic; the folder's own class falls back to sdpa without it."""
    import importlib.util

    import torch
    import transformers
    from verl.utils.model import load_valuehead_model

    from cuda_agent.rl.critic_model import write_critic

    lm = tmp_path / "lm"
    lm.mkdir()
    for item in tiny_model_dir.iterdir():
        (lm / item.name).write_bytes(item.read_bytes())
    config = transformers.AutoConfig.from_pretrained(lm)
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(lm)
    critic_dir = write_critic(lm, tmp_path / "critic")
    config = transformers.AutoConfig.from_pretrained(critic_dir, trust_remote_code=True)
    critic = load_valuehead_model(str(critic_dir), torch.float32, config, trust_remote_code=True)
    assert type(critic).__name__ == "SdpaCritic" and critic.config.num_labels == 1
    if importlib.util.find_spec("flash_attn") is None:
        assert critic.config._attn_implementation == "sdpa"
    out = critic(input_ids=torch.tensor([[1, 2, 3]])).logits
    assert out.shape == (1, 3, 1)
