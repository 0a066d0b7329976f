"""One episode: the model works in a workspace through tools until it finishes or a limit stops it.

The loop asks the model for a turn, runs its tool calls, records the turn, and repeats. It ends on
the model's finish (a reply without tool calls), the turn limit (150 in training, 200 in
evaluation), the token budget (131,072), or a context-length error. Then the final workspace and
the best snapshot the agent verified along the way are scored through `score` (the sandbox's
judge), and the better verdict is the episode's; its reward is the judge's. A failure of ours while
scoring (an `InfraError`) is written to the trajectory as `judge_error` and raised: the episode has no
verdict and no reward, and whoever runs it drops it (episode.py).

Snapshots come from the checks the workspace's tools record (workspace/checks.py), never from
printed text: after each turn the loop reads the checks file and snapshots the workspace when a
check passed on the kernels it holds now (same editable digest).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.agent.context import ContextBudget
from cuda_agent.agent.models.base import Model
from cuda_agent.agent.prompt import opening_messages
from cuda_agent.agent.tools import ToolsConfig, ToolSet
from cuda_agent.agent.trajectory import TrajectoryWriter
from cuda_agent.errors import ContextLengthError, InfraError
from cuda_agent.types import EpisodeEnd, Turn, Verdict
from cuda_agent.workspace import workspace_language
from cuda_agent.workspace.checks import CheckReader, editable_digest, snapshot

Score = Callable[[Path], Verdict]
"""Judges a workspace folder through the sandbox. A candidate's failure is a Verdict; ours raises InfraError."""


class EpisodeConfig(BaseModel):
    """Limits of one episode (the paper's values by default)."""

    model_config = ConfigDict(extra="forbid")

    max_turns: int = Field(default=150, ge=1, description="Model turns: 150 in training, 200 in evaluation.")
    max_tokens: int = Field(default=131_072, ge=1024, description="Context budget in tokens.")
    reserve_tokens: int = Field(default=4096, ge=0, description="Tokens kept free for the model's next reply.")
    tools: ToolsConfig = Field(default_factory=ToolsConfig, description="Tool time limit and output caps.")
    compact_prompt: bool = Field(default=False, description="The short prompt for small contexts (prompt.py).")


class EpisodeResult(BaseModel):
    """What an episode produced."""

    trajectory: Path = Field(description="The trajectory JSONL file.")
    verdict: Verdict = Field(description="The episode's verdict (the better of final and snapshot).")
    final: Verdict = Field(
        description="The final workspace's verdict, reported beside `verdict`; the reward (in training too) is "
        "`verdict`'s, so a checked snapshot counts when the agent broke its kernels afterwards."
    )
    solution: Path = Field(description="The folder the episode's verdict was given to (workspace or snapshot).")
    exit_status: EpisodeEnd = Field(description="What ended the episode: finished, turn_limit, token_budget, ...")
    turns: int = Field(description="Model turns taken.")
    judge_s: list[float] = Field(default_factory=list, description="Seconds of each judgement at the end, in order.")
    cached_judgements: int = Field(default=0, description="Of those, the ones the verdict cache answered.")

    @property
    def reward(self) -> int:
        """The judge's reward of the episode's verdict."""
        return self.verdict.reward


def _checked_score(checks: CheckReader | None, root: Path) -> tuple[int, str] | None:
    """The best score of the checks this turn recorded on the workspace as it is now, with its digest.

    A check of kernels since changed (the agent edited after checking) does not count. The checks file can
    be forged (the agent's shell can write it): a forged check costs at most one extra judgement, because a
    snapshot becomes the episode's verdict only by being judged afresh in `_score_episode`.
    """
    found = checks.new() if checks is not None else []
    if not found:
        return None
    digest = editable_digest(root)
    scores = [c.score for c in found if c.digest == digest and c.score is not None]
    return (max(scores), digest) if scores else None


def run_episode(
    model: Model,
    tools: ToolSet,
    root: Path,
    task_ref: str,
    out_dir: Path,
    score: Score,
    config: EpisodeConfig | None = None,
    on_turn: Callable[[Turn], None] | None = None,
    checks: Path | None = None,
) -> EpisodeResult:
    """Run one episode in the workspace `root`; write the trajectory and snapshots under `out_dir`.

    Args:
        model: the backend (OpenAI-compatible server, transformers, or a replay).
        tools: the episode's tools on `root` (the caller builds and closes them: episode.py).
        root: a workspace made by `create_workspace`.
        task_ref: the task's reference, for the prompt and the trajectory.
        out_dir: where trajectory.jsonl and snapshots/ go.
        score: judges a folder through the sandbox: its Verdict, or InfraError for a failure of ours.
        config: limits; the paper's training values by default.
        on_turn: called with each finished turn (progress display).
        checks: the file the workspace's tools record their checks in (the tools' CUDA_AGENT_CHECKS_FILE);
            None: no snapshots.

    Raises:
        InfraError: scoring failed for a reason of ours (the trajectory says so in `judge_error`).
    """
    config = config or EpisodeConfig()
    out_dir.mkdir(parents=True, exist_ok=True)
    schemas = tools.schemas()
    language = workspace_language(root)  # the setting the workspace was made with, its one record
    prompt = opening_messages(root, [s["function"]["name"] for s in schemas], task_ref, config.compact_prompt, language)
    reader = CheckReader(checks) if checks is not None else None
    best: tuple[int, Path, str] | None = None  # (score, snapshot folder, content digest)
    exit_status, turns = EpisodeEnd.TURN_LIMIT, 0
    budget = ContextBudget(config.max_tokens, counter=lambda msgs: model.count_tokens(msgs, schemas))
    meta = {"workspace": str(root), "config": config.model_dump()}
    with TrajectoryWriter(out_dir / "trajectory.jsonl", task_ref, model.name, prompt, schemas, meta) as writer:
        messages = list(prompt)
        for index in range(config.max_turns):
            if budget.exhausted(messages, config.reserve_tokens):
                exit_status = EpisodeEnd.TOKEN_BUDGET
                break
            started = time.monotonic()
            try:
                reply = model.complete(messages, schemas)
            except ContextLengthError:
                exit_status = EpisodeEnd.CONTEXT_LENGTH
                break
            model_s = time.monotonic() - started
            messages.append(reply.message())
            budget.observe(messages, reply.prompt_tokens, reply.completion_tokens)
            started = time.monotonic()
            results = [tools.execute(call) for call in reply.tool_calls]
            turn = reply.to_turn(index, results, model_s, time.monotonic() - started)
            messages.extend(turn.messages()[1:])
            writer.append(turn)
            turns = index + 1
            if on_turn is not None:
                on_turn(turn)
            checked = _checked_score(reader, root)
            dest = out_dir / "snapshots" / f"turn_{index:03d}"
            if checked is not None and (best is None or checked[0] >= best[0]) and snapshot(root, dest):
                best = (checked[0], dest, checked[1])
            if not reply.tool_calls:
                exit_status = EpisodeEnd.FINISHED
                break
        return _score_episode(writer, root, best, score, exit_status, turns)


def _score_episode(
    writer: TrajectoryWriter,
    root: Path,
    best: tuple[int, Path, str] | None,
    score: Score,
    exit_status: EpisodeEnd,
    turns: int,
) -> EpisodeResult:
    """Judge the final workspace, and the best snapshot when its kernels differ; the better verdict is the
    episode's. Writes the trajectory's end line, with `judge_error` (and re-raises) when judging failed on our side."""
    ended = {
        "exit_status": exit_status,
        "terminated": exit_status is EpisodeEnd.FINISHED,
        "truncated": exit_status is not EpisodeEnd.FINISHED,
    }
    folders = [root, best[1]] if best is not None and best[2] != editable_digest(root) else [root]
    judged, seconds = [], []
    try:
        for folder in folders:
            started = time.monotonic()
            judged.append((folder, score(folder)))
            seconds.append(time.monotonic() - started)
    except InfraError as exc:
        writer.finish(judge_error=f"{type(exc).__name__}: {exc}", **ended)
        raise
    folder, verdict = max(judged, key=lambda fv: fv[1].reward)  # max() keeps the first (final) on ties
    writer.finish(verdict=verdict, reward=verdict.reward, **ended)
    return EpisodeResult(
        trajectory=writer.path,
        verdict=verdict,
        final=judged[0][1],
        solution=folder,
        exit_status=exit_status,
        turns=turns,
        judge_s=seconds,
        cached_judgements=sum(bool(v.env.get("verdict_cached")) for _, v in judged),
    )
