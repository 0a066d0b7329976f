"""One agent episode per task, with both the final workspace and the best snapshot scored.

The paper scores the best solution in a trajectory; we report that and the final workspace's
verdict side by side, since a trainer's reward comes from the final one. The loop judges the final
workspace, and the best snapshot when its kernels differ; the scoring callback here records which
folder got which verdict, so the two never get mixed up.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from cuda_agent.agent.loop import EpisodeConfig, run_episode
from cuda_agent.agent.models import Model
from cuda_agent.evaluation.records import TaskResult
from cuda_agent.evaluation.runner import Pool
from cuda_agent.sandbox.jobs import JudgeJob
from cuda_agent.types import Task, Verdict
from cuda_agent.workspace import create_workspace


def _as_verdict(payload: dict[str, Any] | None) -> Verdict | None:
    return Verdict.model_validate(payload) if payload and payload.get("verdict") != "error" else None


def solve_task(
    task: Task, model: Model, pool: Pool, device: str, out_dir: Path, max_turns: int, judge_config: dict[str, Any]
) -> TaskResult:
    """Run one episode on `task` in `out_dir/<task>` and score it; the best verdict and the final one."""
    start = time.monotonic()
    episode_dir = out_dir / "episodes" / task.ref.replace("/", "_")
    root = create_workspace(task, episode_dir / "workspace", device=device, force=True)
    # The agent's shell must find this interpreter as `python` (the workspace's utils/ import cuda_agent).
    bin_dir, path = str(Path(sys.executable).parent), os.environ.get("PATH", "")
    if bin_dir not in path.split(os.pathsep):
        os.environ["PATH"] = f"{bin_dir}{os.pathsep}{path}"
    judged: dict[Path, dict[str, Any]] = {}

    def score(folder: Path) -> dict[str, Any]:
        job = JudgeJob(task=task.code, solution=str(folder), config={"device": device, **judge_config})
        result = pool.submit(job).result()
        payload = (
            result.verdict.model_dump(mode="json")
            if result.verdict is not None
            else {"verdict": "error", "reward": -1, "message": result.error or result.status}
        )
        judged[Path(folder)] = payload
        return payload

    outcome = run_episode(model, root, task.ref, episode_dir, score, EpisodeConfig(max_turns=max_turns))
    final = _as_verdict(judged.get(Path(root)))
    best = _as_verdict(outcome.verdict)
    errors = [v["message"] for v in judged.values() if v.get("verdict") == "error"]
    return TaskResult(
        ref=task.ref,
        name=task.name,
        level=task.level,
        source=task.source,
        status="judged" if best is not None else "error",
        solution=next((str(f) for f, v in judged.items() if v == outcome.verdict), None),
        verdict=best,
        final=final,
        error="; ".join(errors) or None,
        episode={"trajectory": str(outcome.trajectory), "turns": outcome.turns, "exit_status": outcome.exit_status},
        wall_s=time.monotonic() - start,
    )
