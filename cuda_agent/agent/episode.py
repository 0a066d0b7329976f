"""One episode from a task to its verdict: the one runner behind every caller.

`cuda-agent solve` and `demo` (cli.py), `cuda-agent bench --model` (evaluation/episodes.py) and RL
rollouts (rl/rollout.py) all call `run_task_episode`:

    create_workspace(task)  ->  build_toolset(workspace, this episode's environment, local or sandboxed Bash)
      ->  run_episode(model, tools, checks file)  ->  judge.judge_workspace(final workspace, best snapshot)
      ->  EpisodeResult (typed Verdicts)

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
from cuda_agent.agent.tools import CommandRunner, build_toolset
from cuda_agent.errors import SolutionError
from cuda_agent.types import Language, Task, Turn, Verdict
from cuda_agent.workspace import KERNEL_SUFFIXES, create_workspace, is_editable, source_name, walk
from cuda_agent.workspace.checks import CHECKS_FILE_ENV


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
    commands: CommandRunner | None = None,
    language: Language = "cuda",
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
        commands: run the agent's Bash commands as sandbox jobs through this pool or service client (the
            workspace must be where it can read it); None: in a persistent shell on this machine.
        language: the kernel language the agent writes, 'cuda' (C++/CUDA in kernels/) or 'triton' (`@triton.jit`
            kernels in model_new.py): the workspace's layout and SKILL.md, and the prompt, follow it.

    Raises:
        InfraError: the judgement failed for a reason of ours; the trajectory records it as `judge_error`.
    """
    root = create_workspace(task, out_dir / "workspace", device=device, force=True, language=language)
    settings = {**(judge_config or {}), "device": device}

    def score(folder: Path) -> Verdict:
        # Read here, where the agent wrote it: a workspace it left with nothing to read is its failure (the judge
        # raises for such a folder, rightly for a user who hands it one, and the episode would be lost as ours).
        problems = unreadable_files(folder)
        if problems:
            return unreadable_verdict(task, problems, device, language)
        try:
            return judge.judge_workspace(task, folder, settings)
        except SolutionError as exc:
            # The judge read it again, and it had changed since (a process the agent left behind can still write in
            # its workspace): what the judge cannot read there is the agent's, whenever it became so.
            return unreadable_verdict(task, [str(exc)], device, language)

    # Outside the workspace (file tools cannot reach it); writable by the sandbox's unprivileged user.
    checks = out_dir / "checks.jsonl"
    checks.write_text("")
    checks.chmod(0o666)
    shell = {**shell_env(), **(env or {}), CHECKS_FILE_ENV: str(checks.resolve())}
    limits = (config or EpisodeConfig()).tools
    with build_toolset(root, is_editable, limits, shell, commands) as tools:
        return run_episode(model, tools, root, task.ref, out_dir, score, config, on_turn=on_turn, checks=checks)


def unreadable_files(root: Path) -> list[str]:
    """What the judge would not read of the solution in workspace `root`: model_new.py, kernels/ or anything in it a
    symbolic link; model_new.py missing or not a file; it or a kernel source (kernels/, any depth) not UTF-8 text (its
    content or its name) or not readable. Empty when it can all be read."""
    model_new, kernels = root / "model_new.py", root / "kernels"
    links = [p for p in (model_new, kernels) if p.is_symlink()]
    listed: list[Path] = []
    if kernels.is_dir() and not kernels.is_symlink():
        listed, failed = walk(kernels)
        if failed is not None:
            return [f"kernels/ cannot be read whole ({failed.strerror})"]
        links += [f for f in listed if f.is_symlink()]
    if links:  # the judge reads none through a link (it could point anywhere on the machine)
        return [f"{_shown(p, root)} is a symbolic link" for p in sorted(links)]
    if not model_new.is_file():
        return ["model_new.py is missing (or not a file)"]
    sources = [f for f in listed if f.is_file() and f.suffix in KERNEL_SUFFIXES]
    problems = []
    for path in [model_new, *sources]:
        try:
            name = source_name(path, root)
        except SolutionError:
            problems.append(f"{_shown(path, root)} has a name that is not UTF-8 text")
            continue
        try:
            path.read_text()
        except UnicodeDecodeError:
            problems.append(f"{name} is not a text file")
        except OSError as exc:
            problems.append(f"{name} cannot be read ({exc.strerror})")
    return problems


def _shown(path: Path, root: Path) -> str:
    """`path` below `root` as a verdict's message may hold it: a name that is not UTF-8 in Python's escapes."""
    name = path.relative_to(root).as_posix()
    try:
        name.encode()
    except UnicodeEncodeError:
        return ascii(name)
    return name


def unreadable_verdict(task: Task, problems: list[str], device: str, language: Language) -> Verdict:
    """The verdict of a workspace whose solution cannot be read: rejected, reward -1, as any solution that breaks
    the rules."""
    return Verdict(
        task=task.ref,
        verdict="rejected",
        reward=-1,
        correct=False,
        message=f"nothing to judge: {'; '.join(problems)}. Leave model_new.py and kernels/ as readable text files.",
        device=device,
        language=language,
    )
