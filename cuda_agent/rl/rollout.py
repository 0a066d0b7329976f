"""One training rollout, without verl: task from a dataset row -> workspace -> episode -> judge -> token record.

`agent_loop.py` (the only module that imports verl's agent loop) calls `run_rollout` in a worker
thread with a `VerlTokenModel`; everything here is plain Python on our own components, so it can
be read and tested on its own.

The sandbox: with `sandbox_url` set, the final workspace (and the best snapshot) is judged by a
`cuda-agent serve` service, which reads the folder by path, so the episode folders must be on a
file system the service also sees (a shared mount on a cluster). Without it, a `LocalPool` judges
here. The agent's own tool calls (Bash builds, verification) still run on this machine. A failure
of ours while judging raises (InfraError): the agent loop drops the sample and counts it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cuda_agent.agent import read_trajectory
from cuda_agent.agent.episode import WorkspaceJudge, run_task_episode
from cuda_agent.agent.loop import EpisodeConfig, EpisodeResult
from cuda_agent.agent.models.base import Model
from cuda_agent.errors import ConfigError, TaskError
from cuda_agent.rl.config import CudaAgentLoopConfig, JudgeSettings
from cuda_agent.rl.metrics import dropped_fields, judged_fields
from cuda_agent.sandbox.workspace_commands import SANDBOX_TOKEN_ENV, SANDBOX_URL_ENV
from cuda_agent.tasks import Catalog
from cuda_agent.types import Task, Turn

EDITS = ("Write", "Edit", "MultiEdit")
"""The tools that change files: verification counts only after the last of them."""
CHECK_TOOLS = ("utils.verification", "utils.profiling")
"""The workspace's checks: each run through Bash is a judgement (through the sandbox when it has a URL)."""


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
def sandbox_judge(config: JudgeSettings) -> Iterator[WorkspaceJudge]:
    """The sandbox's judge: the `cuda-agent serve` service at `config.sandbox_url`, or a LocalPool here."""
    from cuda_agent.sandbox import LocalPool, SandboxClient

    if config.sandbox_url:
        with SandboxClient(config.sandbox_url, token=config.sandbox_token, timeout_s=config.judge_timeout_s) as client:
            yield client
    else:
        with LocalPool() as pool:
            yield pool


def run_rollout(
    model: Model, task: Task, config: CudaAgentLoopConfig, episode_dir: Path, max_context_tokens: int
) -> EpisodeResult:
    """Run one episode of `task` with `model` in a fresh workspace under `episode_dir` (the one episode runner).

    Returns:
        The episode's result (verdict, trajectory, judge latencies in `judge_s`).

    Raises:
        ConfigError: `max_context_tokens` is below the loop's minimum of 1024.
        InfraError: the judgement failed for a reason of ours: drop the sample and count it, never score it.
    """
    if max_context_tokens < 1024:
        raise ConfigError(f"prompt_length + response_length is {max_context_tokens}; an episode needs at least 1024")
    env = {}
    if config.sandbox_url:  # the episode's utils/ verification and profiling are judged there too
        env[SANDBOX_URL_ENV] = config.sandbox_url
        if config.sandbox_token:
            env[SANDBOX_TOKEN_ENV] = config.sandbox_token
    # The model enforces the response budget itself (ContextLengthError); no reserve is needed here.
    limits = EpisodeConfig(
        max_turns=config.max_turns,
        max_tokens=max_context_tokens,
        reserve_tokens=0,
        compact_prompt=config.compact_prompt,
    )
    with sandbox_judge(config) as judge:
        # The agent's commands run as sandbox jobs of the judge's pool or service (isolated, killable), never in a
        # shell of the trainer's: so every episode of this loop, SFT data and RL alike, gets the same Bash and the
        # same tool description in its prompt: SFT rows played with a local shell taught a system prompt that
        # RL's rollouts through a service never showed the policy.
        return run_task_episode(
            task, model, judge, episode_dir, config.device, limits, env=env, commands=judge, language=config.language
        )


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


def tool_use_fields(turns: list[Turn]) -> dict[str, float]:
    """How the episode used its tools, the behaviour the agentic curriculum teaches (agentic_sft.py).

    Returns:
        verified: 1.0 when `python -m utils.verification` ran after the last edit of the kernels or
            model_new.py through a file tool and the episode then finished (its last reply made no call): the
            final code was checked before finishing. An episode cut by a limit did not finish: 0.0. An edit made
            through Bash, such as `sed -i`, is not seen;
        valid_tool_calls: the share of tool calls that parsed and named a tool with valid arguments
            (1.0 for an episode without calls);
        tool_call_turns: the share of the model's turns whose tool calls the loop could parse (at least one,
            all parsed), over every turn but a last one without a call (the finish, which is no failed call);
            0.0 for an episode that never called a tool. A model that writes prose instead of calls scores low
            here while `valid_tool_calls` cannot see it;
        tool_checks: `utils.verification` and `utils.profiling` runs, each a judgement the episode asked for.
    """
    from cuda_agent.rl.rft import MALFORMED_RESULT

    calls, valid, checks, verified = 0, 0, 0, False
    for turn in turns:
        results = {r.tool_call_id: r for r in turn.tool_results}
        for call in turn.tool_calls:
            calls += 1
            result = results.get(call.id)
            malformed = call.error is not None or (result is not None and MALFORMED_RESULT.match(result.output))
            valid += not malformed
            if call.name in EDITS:
                verified = False
            elif call.name == "Bash" and not malformed and "utils.verification" in call.arguments:
                verified = True
            checks += call.name == "Bash" and not malformed and any(t in call.arguments for t in CHECK_TOOLS)
    finished = bool(turns) and not turns[-1].tool_calls
    asked = len(turns) - finished
    parsed = sum(1 for turn in turns if turn.tool_calls and all(c.error is None for c in turn.tool_calls))
    return {
        "verified": float(verified and finished),
        "valid_tool_calls": valid / calls if calls else 1.0,
        "tool_call_turns": parsed / asked if asked else 0.0,
        "tool_checks": float(checks),
    }


def episode_fields(result: EpisodeResult, response_ids: list[int], capped: bool) -> dict:
    """The extra_fields verl carries per sample into its metrics: flat scalars, plus the verdict as JSON text."""
    verdict = result.verdict
    turns = read_trajectory(result.trajectory).turns
    return {
        "tool_rounds": sum(1 for turn in turns if turn.tool_results),
        **tool_use_fields(turns),
        "model_s": sum(turn.model_s for turn in turns),
        "tools_s": sum(turn.tools_s for turn in turns),
        "verdict": verdict.verdict,
        "reward": float(verdict.reward),
        "correct": verdict.correct,
        "speedup_vs_compile": verdict.speedup_vs_compile,
        "turns": result.turns,
        "exit_status": result.exit_status,
        "judge_s": sum(result.judge_s),
        "judgements": len(result.judge_s),
        "cached_judgements": result.cached_judgements,
        "response_tokens": len(response_ids),
        "clipped": capped,
        "verdict_json": json.dumps(verdict.model_dump(mode="json"), sort_keys=True),
        "trajectory": str(result.trajectory),
    }


EPISODE_FIELDS = (
    "turns",
    "clipped",
    "judge_s",
    "verified",
    "valid_tool_calls",
    "tool_call_turns",
    "response_tokens",
    # The step's judging: fresh judgements vs the verdict cache's answers (the episode's final ones), and the
    # checks the episode ran itself; and where its time went (the rollout's wall time overlaps episodes).
    "judgements",
    "cached_judgements",
    "tool_checks",
    "model_s",
    "tools_s",
)
"""The episode's numeric fields in `reward_extra_info`, beside `judged_fields`."""


def reward_extra_info(result: EpisodeResult, fields: dict) -> dict:
    """The numeric per-sample fields verl aggregates into metrics (`cuda_agent.rl.metrics`), from `episode_fields`."""
    return {**judged_fields(result.verdict.model_dump(mode="json"), fields["reward"]), **_episode_numbers(fields)}


def dropped_extra_info(reason: str) -> dict:
    """`reward_extra_info` of a sample dropped for our failure: every key a judged sample has (verl takes the
    batch's keys from its first sample and reads them from every other), the episode's at 0."""
    return {**dropped_fields(reason), **dict.fromkeys(EPISODE_FIELDS, 0.0)}


def _episode_numbers(fields: dict) -> dict[str, float]:
    return {key: float(fields[key]) for key in EPISODE_FIELDS}
