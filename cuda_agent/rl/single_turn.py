"""Stage 1, the single-turn warm-up: the prompt, reading the one answer, and the reward function for verl.

The model answers once with every file of a workspace solution (kernels, bindings, `model_new.py`),
each a fenced code block with its path on the line above (the prompt asks for exactly this form).
`compute_score` writes those files into a fresh candidate folder (`model_new.py` + `kernels/`, the
workspace form the judge reads, with the package's own binding glue) and judges it through the
sandbox: a `cuda-agent serve` service when a URL is set (in the recipe or `CUDA_AGENT_SANDBOX_URL`, which
`plan_training` writes into `reward_kwargs`), otherwise a `LocalPool` on this machine.

Enable it in verl (the single-turn recipe does):

    reward.custom_reward_function.path=pkg://cuda_agent.rl.single_turn
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs={device:cuda,work_dir:/shared/single_turn}

An answer that cannot be read (no code block, no model_new.py, cut off inside a block) is the
model's failure: reward -1, verdict "malformed" and the reason, never an exception. A failure of
ours while judging (the service unreachable, a worker that died: `metrics.OUR_FAILURES`) is never
taught as a -1 nor fatal to the step: the sample comes back with `our_failure` 1.0 and score 0, and
our agent-loop worker masks it out of the batch (`metrics.mask_our_failure`). A row without a
task is a broken data set and raises.

What this does not protect against: without a service, every call judges in a pool of its own,
so concurrent calls on one machine can time on the same GPU at once; train with `cuda-agent serve`.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.judge import detect_language
from cuda_agent.rl.config import JudgeSettings
from cuda_agent.rl.metrics import dropped_fields, is_our_failure, judged_fields
from cuda_agent.rl.rollout import sandbox_judge, task_from_row
from cuda_agent.sandbox.workspace_commands import SANDBOX_URL_ENV
from cuda_agent.types import Language, Task
from cuda_agent.workspace import is_editable

PROMPTS = Path(__file__).parent / "prompts"
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")
_PATH = re.compile(r"(?<![\w/.-])(model_new\.py|kernels/[\w.-]+)")
_REASON_CHARS = 300


def _render(name: str, **values: Any) -> str:
    import jinja2

    template = jinja2.Template((PROMPTS / name).read_text(), undefined=jinja2.StrictUndefined)
    return template.render(**values).strip() + "\n"


def single_turn_messages(task: Task, device: str, language: Language = "cuda") -> list[dict[str, str]]:
    """The chat prompt of the single-turn stage: the rules and answer form (system), then the task (user).

    `language` 'triton' asks for one file, `model_new.py` with `@triton.jit` kernels; 'cuda' for C++/CUDA kernels,
    their bindings and `model_new.py`.
    """
    system = "single_turn_system_triton.md.jinja" if language == "triton" else "single_turn_system.md.jinja"
    return [
        {"role": "system", "content": _render(system, device=device)},
        {"role": "user", "content": _render("single_turn_task.md.jinja", ref=task.ref, code=task.code.rstrip())},
    ]


@dataclass(frozen=True)
class Answer:
    """The files read from one answer, or why it could not be read."""

    files: dict[str, str] = field(default_factory=dict)
    """Workspace-relative path ('model_new.py', 'kernels/x.cu') -> text; the last block of a path wins."""
    problem: str | None = None
    """Why the answer cannot be judged; None when it can."""


def _path_in(text: str) -> str | None:
    found = [p.rstrip(".") for p in _PATH.findall(text) if is_editable(p.rstrip("."))]
    return found[-1] if found else None


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return len(stripped) >= len(fence) and set(stripped) == {fence[0]}


def parse_answer(text: str) -> Answer:
    """Read the solution files out of a model's answer.

    A block's path comes from its fence line (```cpp kernels/a.cpp), else from the last non-empty
    line above it since the previous block (`kernels/a.cpp`, **kernels/a.cpp**, ### File: ...), else
    from a comment on its first line. A python block with `class ModelNew` and no path is
    model_new.py. Blocks with no usable path (shell commands, a read-only file) are ignored.
    Anything before a closing `</think>` is the model's reasoning and is skipped.
    """
    lines = text.rsplit("</think>", 1)[-1].splitlines()
    files: dict[str, str] = {}
    unnamed_model: str | None = None
    header, blocks, i = "", 0, 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            header = lines[i] if lines[i].strip() else header
            i += 1
            continue
        fence, info = opening.group(1), opening.group(2)
        end = next((j for j in range(i + 1, len(lines)) if _closes(lines[j], fence)), None)
        if end is None:
            return Answer(files, "the answer ends inside a code block (cut off at the length limit?)")
        body = lines[i + 1 : end]
        path = _path_in(info) or _path_in(header) or (_path_in(body[0]) if body and _is_comment(body[0]) else None)
        source = "\n".join(body) + "\n"
        if path:
            files[path] = source
        elif "class ModelNew" in source:
            unnamed_model = source
        blocks, header, i = blocks + 1, "", end + 1
    if "model_new.py" not in files and unnamed_model is not None:
        files["model_new.py"] = unnamed_model
    if not blocks:
        return Answer(files, "no code block in the answer")
    if "model_new.py" not in files:
        return Answer(files, "no model_new.py block (put each file's path on the line above its code block)")
    return Answer(files)


def _is_comment(line: str) -> bool:
    return line.lstrip().startswith(("//", "#", "/*"))


def _in_language(answer: Answer, language: Language) -> Answer:
    """The answer as the row's language reads it: a Triton row uses `model_new.py` alone; an answer in the other
    language cannot be judged (the judge would take it as what it is, and a Triton writer must not learn from a CUDA
    answer's reward, nor a CUDA writer from a Triton one's)."""
    if answer.problem is not None:
        return answer
    wrote = detect_language(answer.files["model_new.py"])
    if wrote != language:
        asked = "Triton kernels (model_new.py imports triton)" if language == "triton" else "C++/CUDA kernels"
        return Answer(answer.files, f"the task asks for {asked}; the answer's kernels are {wrote}")
    if language == "triton":
        return Answer({"model_new.py": answer.files["model_new.py"]})
    return answer


def write_candidate(files: Mapping[str, str], folder: Path) -> Path:
    """Write an answer's files as a workspace-form solution folder (model_new.py and kernels/)."""
    (folder / "kernels").mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        (folder / path).write_text(text)
    return folder


def _settings(kwargs: Mapping[str, Any]) -> JudgeSettings:
    # verl adds its own keyword arguments (reward_router_address, ...); only ours configure the judge.
    values = {key: value for key, value in kwargs.items() if key in JudgeSettings.model_fields and value is not None}
    values.setdefault("sandbox_url", os.environ.get(SANDBOX_URL_ENV) or None)
    return JudgeSettings(**values)


def _slug(ref: str) -> str:
    return re.sub(r"[^\w.-]+", "_", ref).strip("_")[:80] or "task"


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Mapping[str, Any] | None = None, **kwargs: Any
) -> dict[str, Any]:
    """verl's custom reward function for the single-turn stage: judge the one answer.

    Args:
        data_source: the row's data source (unused; rows carry the task).
        solution_str: the decoded response.
        ground_truth: the row's `reward_model.ground_truth`, our task reference (used when
            `extra_info` has neither `task` nor `code`).
        extra_info: the row's extra_info: `task` (reference) and `code` (the problem source).
        **kwargs: `JudgeSettings` fields from `reward_kwargs` (work_dir, device, sandbox_url, ...);
            others are ignored.

    Returns:
        `score` (the reward: -1, 1, 2 or 3) and, with the same keys for every answer, what verl logs:
        verdict ("malformed" for an unreadable answer, "dropped" for our failure), passed,
        faster_than_eager, faster_than_compile, speedup_vs_compile, our_failure, judge_s and reason.

    Raises:
        TaskError: the row names no task.
    """
    settings = _settings(kwargs)
    row = {"extra_info": dict(extra_info or {})}
    if not (row["extra_info"].get("task") or row["extra_info"].get("code")) and ground_truth:
        row["task"] = str(ground_truth)
    task = task_from_row(row)
    answer = _in_language(parse_answer(solution_str), row["extra_info"].get("language") or "cuda")
    if answer.problem is not None:
        return {**judged_fields({"verdict": "malformed"}, -1.0), "judge_s": 0.0, "reason": answer.problem}
    folder = write_candidate(answer.files, settings.work_dir / f"{_slug(task.ref)}-{uuid.uuid4().hex[:12]}")
    started: float | None = None  # the judgement's own time, not the sandbox client's or pool's start
    try:
        with sandbox_judge(settings) as judge:
            started = time.monotonic()
            verdict = judge.judge_workspace(task, folder.resolve(), {"device": settings.device})
            judge_s = time.monotonic() - started
    except Exception as exc:
        if not is_our_failure(exc):
            raise
        spent = 0.0 if started is None else time.monotonic() - started
        return {**dropped_fields(str(exc)), "judge_s": spent, "reason": str(exc)[:_REASON_CHARS]}
    reason = "" if verdict.verdict == "pass" else verdict.message[:_REASON_CHARS]
    fields = judged_fields(verdict.model_dump(mode="json"), verdict.reward)
    return {**fields, "judge_s": judge_s, "reason": reason}
