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
    max_turn_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Most tokens of one model reply (None: the episode's budget left). A reply cut here has no "
        "finished tool call and ends the episode; a cap keeps one rambling sample from holding a batched rollout.",
    )
    save_tokens: bool = Field(
        default=False, description="Write tokens.json beside each trajectory (collect: RFT and the critic read it)."
    )
    language: Language = Field(
        default="cuda", description="Kernel language the agent writes: 'cuda' (kernels/) or 'triton' (model_new.py)."
    )


class ClusterSettings(BaseModel):
    """How a recipe splits one node between training and the judge, and what it asks of the judge per step.

    The training GPUs are verl's `trainer.n_gpus_per_node`; the judge's run `cuda-agent serve` beside them
    (`CUDA_VISIBLE_DEVICES` set apart, README). The dry run checks the split and, from the service's measured
    rate (`GET /stats`), that the judge keeps up with the rollout.
    """

    model_config = ConfigDict(extra="forbid")

    gpus_per_node: int = Field(default=8, ge=1, description="GPUs on the node, training's and the judge's together.")
    judge_gpus: int = Field(default=0, ge=0, description="GPUs of the node kept for `cuda-agent serve` (0: elsewhere).")
    checks_per_episode: float = Field(
        default=8.0, gt=0, description="Judgements an episode asks for (its verification runs and the final one)."
    )
    judging_s_per_step: float = Field(
        default=3600.0, gt=0, description="Seconds a step's rollout may spend waiting for the judge in all."
    )
