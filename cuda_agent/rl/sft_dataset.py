"""verl's multi-turn SFT dataset, reading our RFT parquet so that it trains on the tokens the rollouts had.

Rows with `input_ids` and `loss_mask` (episodes rolled out under verl: `rft.TokenRecord`) are used
exactly as stored: the ids the policy saw and sampled, the loss on its own tokens only. Re-rendering
the messages through the chat template can give other ids than the rollout had (tool-call JSON
spacing and key order, whitespace the template normalises), and RFT must teach what was generated.

Rows without them (trajectories from an OpenAI-compatible server, which gives no token ids) are
rendered from their messages, with two corrections so the rendering matches the rollouts:

- Tool-call arguments are stored as JSON text (one column type for every tool) and handed to the
  chat template as dicts, as our backends do (`template_messages`); a template given text would
  print it as a quoted string, which the model never generated.
- Parquet stores a list of tool schemas as one struct type, so every tool's `properties` comes back
  with the other tools' argument names set to null (`Read` would list `command: null`). The chat
  template would print those nulls into the system prompt, which the policy never saw in its
  rollouts. This dataset drops null-valued keys from the tools and messages after verl loads them.
  (A schema that really holds a JSON null, e.g. `"default": null`, loses it; ours hold none.)

Rendering is slow (verl renders the chat template once per message to find each message's tokens: ~50 ms a
row on a busy CPU core, ~1.2 s for a 24-row step of the curriculum, with `num_workers: 0` in the trainer's own
process and repeated every epoch), and our SFT sets repeat rows (the curriculum's copies). So a rendered row
is kept by its content (messages and tools) and a repeat costs a dictionary look-up.

Use it through verl's extension point for dataset classes (a subclass is what verl asks for):
`data.custom_cls.path=pkg://cuda_agent.rl.sft_dataset data.custom_cls.name=RFTDataset`.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import torch
from verl.utils.dataset.dataset_utils import DatasetPadMode
from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

from cuda_agent.agent.models.transformers_local import template_messages
from cuda_agent.rl.rft import drop_nulls


class RFTDataset(MultiTurnSFTDataset):
    """`MultiTurnSFTDataset` over `rft.write_rft_data` rows: exact token rows as stored, others re-rendered."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.tools is not None:
            self.tools = [drop_nulls(tools) for tools in self.tools]
        self._rendered: dict[str, dict[str, torch.Tensor]] = {}

    def _build_messages(self, example: dict) -> list:
        return template_messages(drop_nulls(super()._build_messages(example)))

    def __getitem__(self, item: int) -> dict[str, torch.Tensor]:
        row = self.dataframe.iloc[item]
        ids = row.get("input_ids") if "input_ids" in self.dataframe.columns else None
        if not isinstance(ids, list | tuple | np.ndarray) or len(ids) == 0:  # null comes back as None or pd.NA
            tools = self.tools[item] if self.tools is not None else None
            key = json.dumps([self._build_messages(row.to_dict()), tools], sort_keys=True, default=str)
            if key not in self._rendered:
                self._rendered[key] = super().__getitem__(item)
            return {
                name: value.clone() if isinstance(value, torch.Tensor) else value
                for name, value in self._rendered[key].items()
            }
        return self._pack(
            torch.tensor(list(ids), dtype=torch.long), torch.tensor(list(row["loss_mask"]), dtype=torch.long)
        )

    def _pack(self, input_ids: torch.Tensor, loss_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        # verl's padding and truncation rules for one sequence (MultiTurnSFTDataset.__getitem__, steps 2-3).
        n = input_ids.shape[0]
        if n > self.max_length:
            if self.truncation == "error":
                raise ValueError(f"a row has {n} tokens, more than data.max_length={self.max_length}")
            keep = slice(-self.max_length, None) if self.truncation == "left" else slice(None, self.max_length)
            input_ids, loss_mask, n = input_ids[keep], loss_mask[keep], self.max_length
        position_ids = torch.arange(n, dtype=torch.long)
        if self.pad_mode == DatasetPadMode.NO_PADDING:
            return {"input_ids": input_ids, "position_ids": position_ids, "loss_mask": loss_mask}
        pad = self.max_length - n
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        return {
            "input_ids": torch.cat((input_ids, torch.full((pad,), pad_id, dtype=torch.long))),
            "attention_mask": torch.cat((torch.ones(n, dtype=torch.long), torch.zeros(pad, dtype=torch.long))),
            "position_ids": torch.cat((position_ids, torch.zeros(pad, dtype=torch.long))),
            "loss_mask": torch.cat((loss_mask, torch.zeros(pad, dtype=torch.long))),
        }
