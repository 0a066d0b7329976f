"""One episode from a task to its verdict: the one runner behind every caller.

`cuda-agent solve` and `demo` (cli.py), `cuda-agent bench --model` (evaluation/episodes.py) and RL
rollouts (rl/rollout.py) all call `run_task_episode`:

    create_workspace(task)  ->  run_episode(model, tools with this episode's environment)
      ->  judge.judge_workspace(final workspace, best snapshot)  ->  EpisodeResult (typed Verdicts)

The judge is the sandbox's interface (`WorkspaceJudge`: a LocalPool, a RayPool or a SandboxClient);
a candidate's failure comes back as a Verdict, ours as an `InfraError`, which this raises on for the
caller to drop and count. Nothing here changes the process's environment: what the agent's shell
needs (this interpreter first on PATH, the sandbox service for utils/ verification) goes to its tools.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from cuda_agent.agent.loop import EpisodeConfig, EpisodeResult, run_episode
from cuda_agent.agent.models.base import Model
from cuda_agent.types import Task, Turn, Verdict
from cuda_agent.workspace import create_workspace


class WorkspaceJudge(Protocol):
    """Judges a workspace folder: `LocalPool`, `RayPool` and `SandboxClient` all fit.

    Raises InfraError for a failure of ours (never a verdict), Error for bad input.
    """

    def judge_workspace(self, task: Task, workspace: Path, config: Mapping[str, Any] | None = None) -> Verdict: ...


def shell_env() -> dict[str, str]:
    """What every episode's shell needs on top of our environment: this interpreter first on PATH (the
    workspace's utils/ commands run `python` and import cuda_agent)."""
    bin_dir, path = str(Path(sys.executable).parent), os.environ.get("PATH", "")
    return {} if path.split(os.pathsep)[:1] == [bin_dir] else {"PATH": f"{bin_dir}{os.pathsep}{path}"}


def run_task_episode(
    task: Task,
    model: Model,
    judge: WorkspaceJudge,
    out_dir: Path,
    device: str,
    config: EpisodeConfig | None = None,
    judge_config: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    on_turn: Callable[[Turn], None] | None = None,
) -> EpisodeResult:
    """Run one episode of `task` in a fresh workspace under `out_dir` and judge it.

    Args:
        task: the problem.
        model: the backend that writes the turns.
        judge: the sandbox's judge (a pool or a service client).
        out_dir: gets workspace/, trajectory.jsonl and snapshots/.
        device: 'cuda' or 'cpu': the workspace's build target and the judge's device.
        config: the episode's limits (the paper's training values by default).
        judge_config: JudgeConfig fields for the final judgements (the device is set from `device`).
        env: more of the shell's environment (e.g. the sandbox service that judges utils/ verification).
        on_turn: called with each finished turn.

    Raises:
        InfraError: the judgement failed for a reason of ours; the trajectory records it as `judge_error`.
    """
    root = create_workspace(task, out_dir / "workspace", device=device, force=True)
    settings = {**(judge_config or {}), "device": device}

    def score(folder: Path) -> Verdict:
        return judge.judge_workspace(task, folder, settings)

    shell = {**shell_env(), **(env or {})}
    return run_episode(model, root, task.ref, out_dir, score, config, on_turn=on_turn, env=shell)
