"""verl's multi-turn SFT dataset, reading our RFT parquet so that it renders as the agent's rollouts did.

Two differences from the plain `MultiTurnSFTDataset`, both so that the SFT tokens are the rollout's:

- Tool-call arguments are stored as JSON text (one column type for every tool) and handed to the
  chat template as dicts, as our backends do (`template_messages`); a template given text would
  print it as a quoted string, which the model never generated.
- Parquet stores a list of tool schemas as one struct type, so every tool's `properties` comes back
with the other tools' argument names set to null (`Read` would list `command: null`). The chat
template would print those nulls into the system prompt, which the policy never saw in its
rollouts. This dataset drops null-valued keys from the tools and messages after verl loads them. (A schema
that really holds a JSON null, e.g. `"default": null`, loses it; ours hold none.)

Use it through verl's extension point for dataset classes (a subclass is what verl asks for):
`data.custom_cls.path=pkg://cuda_agent.rl.sft_dataset data.custom_cls.name=RFTDataset`.
"""

from __future__ import annotations

from typing import Any

from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

from cuda_agent.agent.models.transformers_local import template_messages
from cuda_agent.rl.rft import drop_nulls


class RFTDataset(MultiTurnSFTDataset):
    """`MultiTurnSFTDataset` whose tools and messages are restored to what `write_sft_parquet` was given."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.tools is not None:
            self.tools = [drop_nulls(tools) for tools in self.tools]

    def _build_messages(self, example: dict) -> list:
        return template_messages(drop_nulls(super()._build_messages(example)))
