"""Settings of the judge behind training and of the `cuda_agent` agent loop: light (pydantic only), so
recipes and the CLI can import them."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.types import Language


class JudgeSettings(BaseModel):
    """Where candidates are written and how they are judged (the single-turn reward function's settings)."""

    model_config = ConfigDict(extra="forbid")

    work_dir: Path = Field(default=Path("runs/rollouts"), description="Candidate folders go here, one per rollout.")
    sandbox_url: str | None = Field(default=None, description="A `cuda-agent serve` URL; None judges in a LocalPool.")
    sandbox_token: str | None = Field(default=None, description="Bearer token of the service, if it wants one.")
    device: Literal["cuda", "cpu"] = Field(default="cuda", description="Kernel kind and judge device.")
    judge_timeout_s: float = Field(default=3600.0, gt=0, description="Longest wait for one judgement.")
    share_training_gpus: bool = Field(
        default=False,
        description="Judge without a service, on the GPUs training uses (a one-GPU demo; timings are noisy).",
    )


class CudaAgentLoopConfig(JudgeSettings):
    """Settings of the `cuda_agent` agent loop (the keys beside `_target_` in verl's agent-loop YAML)."""

    max_turns: int = Field(default=150, ge=1, description="Model turns per episode (the paper: 150 in training).")
    compact_prompt: bool = Field(
        default=False, description="The short system prompt for small contexts (SmolLM2's 8k) instead of SKILL.md."
    )
    save_tokens: bool = Field(
        default=False, description="Write tokens.json beside each trajectory (collect: RFT and the critic read it)."
    )
    language: Language = Field(
        default="cuda", description="Kernel language the agent writes: 'cuda' (kernels/) or 'triton' (model_new.py)."
    )
