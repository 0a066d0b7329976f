"""One training rollout, without verl: task from a dataset row -> workspace -> episode -> judge -> token record.

`agent_loop.py` (the only module that imports verl's agent loop) calls `run_rollout` in a worker
thread with a `VerlTokenModel`; everything here is plain Python on our own components, so it can
be read and tested on its own.

The sandbox: with `sandbox_url` set, the final workspace (and the best snapshot) is judged by a
`cuda-agent serve` service, which reads the folder by path, so the episode folders must be on a
file system the service also sees (a shared mount on a cluster). Without it, a `LocalPool` judges
here. The agent's own tool calls (Bash builds, verification) still run on this machine.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.agent import read_trajectory
from cuda_agent.agent.loop import EpisodeConfig, EpisodeResult, run_episode
from cuda_agent.agent.models.base import Model
from cuda_agent.errors import ConfigError, TaskError
from cuda_agent.rl.config import CudaAgentLoopConfig, JudgeSettings
from cuda_agent.rl.metrics import judged_fields
from cuda_agent.tasks import Catalog
from cuda_agent.types import Task
from cuda_agent.workspace import create_workspace


class RolloutResult(BaseModel):
    """The token record and the judge's answer for one rollout (what verl's AgentLoopOutput needs)."""

    model_config = ConfigDict(extra="forbid")

    prompt_ids: list[int] = Field(description="The first prompt's token ids.")
    response_ids: list[int] = Field(description="Generated and tool-output ids, capped, ending on a model token.")
    response_mask: list[int] = Field(description="1 on generated ids, 0 on tool-output ids; len == response_ids.")
    response_logprobs: list[float] | None = Field(description="Log-prob per response id (0.0 off the model).")
    reward: float = Field(description="The judge's reward, -1 when nothing was judged.")
    num_turns: int = Field(description="Assistant turns + tool-result rounds + 1, as verl counts chat turns.")
    extra_fields: dict[str, Any] = Field(description="verdict, reward, turns, exit_status, judge_s, ... for metrics.")


def task_from_row(row: Mapping[str, Any], catalog: Catalog | None = None) -> Task:
    """The task of a dataset row: a `task` reference or `code` source, at top level or in `extra_info`.

    Raises:
        TaskError: the row has neither, or the reference does not resolve.
    """
    fields = {**dict(row.get("extra_info") or {}), **{k: v for k, v in row.items() if k in ("task", "code")}}
    if fields.get("code"):
        ref = str(fields.get("task") or "dataset/inline")
        return Task(ref=ref, name=ref.rsplit("/", 1)[-1], source="dataset", code=str(fields["code"]))
    if fields.get("task"):
        return (catalog or Catalog()).resolve(str(fields["task"]))
    raise TaskError("the dataset row has no 'task' reference and no 'code'; add one (or put it in extra_info)")


@contextmanager
def judge_scorer(task: Task, config: JudgeSettings) -> Iterator[tuple[Callable[[Path], dict], list[float]]]:
    """A `score(folder) -> verdict dict` through the service or a LocalPool, and the list of judge latencies (s)."""
    from cuda_agent.sandbox import JudgeJob, LocalPool, SandboxClient

    latencies: list[float] = []
    judge_config = {"device": config.device}
    if config.sandbox_url:
        client = SandboxClient(config.sandbox_url, token=config.sandbox_token, timeout_s=config.judge_timeout_s)

        def judge(folder: Path) -> dict:
            return client.judge_workspace(task.code, folder.resolve(), judge_config).model_dump(mode="json")

        closer: Any = client
    else:
        pool = LocalPool()

        def judge(folder: Path) -> dict:
            result = pool.run(JudgeJob(task=task.code, solution=str(folder), config=judge_config))
            if result.verdict is None:  # our failure, not the candidate's: recorded, scored as -1
                return {"verdict": "error", "reward": -1, "message": result.error or result.status}
            return result.verdict.model_dump(mode="json")

        closer = pool

    def score(folder: Path) -> dict:
        started = time.monotonic()
        try:
            return judge(folder)
        finally:
            latencies.append(time.monotonic() - started)

    with closer:
        yield score, latencies


def _python_on_path() -> dict[str, str]:
    # The workspace's utils/ commands run `python` and need cuda_agent: the agent's shell must find this interpreter.
    bin_dir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    return {} if path.split(os.pathsep)[:1] == [bin_dir] else {"PATH": f"{bin_dir}{os.pathsep}{path}"}


def run_rollout(
    model: Model, task: Task, config: CudaAgentLoopConfig, episode_dir: Path, max_context_tokens: int
) -> tuple[EpisodeResult, list[float]]:
    """Run one episode of `task` with `model` in a fresh workspace under `episode_dir`; judge it.

    Returns:
        The episode's result and the judge latencies in seconds.

    Raises:
        ConfigError: `max_context_tokens` is below the loop's minimum of 1024.
    """
    if max_context_tokens < 1024:
        raise ConfigError(f"prompt_length + response_length is {max_context_tokens}; an episode needs at least 1024")
    os.environ.update(_python_on_path())
    if config.sandbox_url:  # the episode's utils/ verification and profiling are judged there too
        os.environ["CUDA_AGENT_SANDBOX_URL"] = config.sandbox_url
        if config.sandbox_token:
            os.environ["CUDA_AGENT_SANDBOX_TOKEN"] = config.sandbox_token
    root = create_workspace(task, episode_dir / "workspace", device=config.device, force=True)
    # The model enforces the response budget itself (ContextLengthError); no reserve is needed here.
    limits = EpisodeConfig(max_turns=config.max_turns, max_tokens=max_context_tokens, reserve_tokens=0)
    with judge_scorer(task, config) as (score, latencies):
        result = run_episode(model, root, task.ref, episode_dir / "run", score, limits)
    return result, latencies


def token_record(
    response_ids: list[int],
    response_mask: list[int],
    response_logprobs: list[float] | None,
    response_length: int,
) -> tuple[list[int], list[int], list[float] | None]:
    """Cap the response at `response_length` and drop trailing tool output, so it ends on a model token.

    Why trim: verl puts the reward on the last response token, and GAE discards the TD error on
    tokens with mask 0; trailing tool output carries no loss and nothing after it was generated.
    """
    end = min(len(response_ids), response_length)
    model_positions = [i for i in range(end) if response_mask[i]]
    if model_positions:
        end = model_positions[-1] + 1
    logprobs = response_logprobs[:end] if response_logprobs is not None else None
    return response_ids[:end], response_mask[:end], logprobs


def episode_fields(result: EpisodeResult, latencies: list[float], response_ids: list[int], capped: bool) -> dict:
    """The extra_fields verl carries per sample into its metrics: flat scalars, plus the verdict as JSON text."""
    verdict = result.verdict or {}
    turns = read_trajectory(result.trajectory).turns
    return {
        "tool_rounds": sum(1 for turn in turns if turn.tool_results),
        "model_s": sum(turn.model_s for turn in turns),
        "tools_s": sum(turn.tools_s for turn in turns),
        "verdict": verdict.get("verdict", "none"),
        "reward": float(result.reward if result.reward is not None else -1),
        "correct": bool(verdict.get("correct", False)),
        "speedup_vs_compile": verdict.get("speedup_vs_compile"),
        "turns": result.turns,
        "exit_status": result.exit_status,
        "judge_s": sum(latencies),
        "judgements": len(latencies),
        "response_tokens": len(response_ids),
        "clipped": capped,
        "verdict_json": json.dumps(verdict, sort_keys=True),
        "trajectory": str(result.trajectory),
    }


def reward_extra_info(result: EpisodeResult, fields: dict) -> dict:
    """The numeric per-sample fields verl aggregates into metrics (`cuda_agent.rl.metrics`), from `episode_fields`."""
    return {
        **judged_fields(result.verdict, fields["reward"]),
        "turns": fields["turns"],
        "clipped": float(fields["clipped"]),
        "judge_s": fields["judge_s"],
    }
