"""One agent episode per task, with both the final workspace and the best snapshot scored.

The paper scores the best solution in a trajectory, and so do we (the episode's verdict, whose reward
training uses too); the final workspace's verdict is reported beside it, to show what the snapshots
add. The episode itself is the
one runner every caller uses (agent/episode.py); a failure of ours while judging raises, and the
runner (runner.run_episodes) records the task as an error of ours, retried on resume, never scored.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from cuda_agent.agent.episode import run_task_episode
from cuda_agent.agent.loop import EpisodeConfig
from cuda_agent.agent.models import Model
from cuda_agent.evaluation.records import TaskResult
from cuda_agent.evaluation.runner import Pool
from cuda_agent.types import Language, Task


def solve_task(
    task: Task,
    model: Model,
    pool: Pool,
    device: str,
    out_dir: Path,
    max_turns: int,
    judge_config: dict[str, Any],
    language: Language = "cuda",
) -> TaskResult:
    """Run one episode on `task` in `out_dir/episodes/<task>` and score it; the best verdict and the final one.

    Raises:
        InfraError: the judgement failed for a reason of ours (no verdict exists).
    """
    start = time.monotonic()
    episode_dir = out_dir / "episodes" / task.ref.replace("/", "_")
    config = EpisodeConfig(max_turns=max_turns)
    outcome = run_task_episode(task, model, pool, episode_dir, device, config, judge_config, language=language)
    return TaskResult(
        ref=task.ref,
        name=task.name,
        level=task.level,
        source=task.source,
        status="judged",
        solution=str(outcome.solution),
        verdict=outcome.verdict,
        final=outcome.final,
        episode={"trajectory": str(outcome.trajectory), "turns": outcome.turns, "exit_status": outcome.exit_status},
        wall_s=time.monotonic() - start,
    )
