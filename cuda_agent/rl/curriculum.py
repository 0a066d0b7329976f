"""The "learning is visible" curriculum: a tiny model learns to prefer the kernel the judge rewards more.

A tiny model cannot write CUDA kernels, so this curriculum does not ask it to. For each curriculum
task (a bundled example, `examples/scale_add`) there are three hand-written single-turn answers,
in `curriculum_kernels/<task>/`, for the CPU (C++, CI) and for CUDA (the H200):

| variant | what it does | the judge's reward |
| --- | --- | --- |
| `fast`  | fused, one pass (eager makes two passes and a temporary) | 2 or 3 (more than 5 % faster than eager) |
| `slow`  | correct, but a strided single-thread walk (CPU) or three unfused passes (CUDA) | 1 |
| `wrong` | forgets `alpha` (x + y) | -1 (incorrect) |

The three answers share `model_new.py` (and on CUDA the binding); they differ in the kernel file, which
the answer gives first, so the policy chooses the variant within its first few tokens (a comment line).

On CUDA the task is the example at 128M elements a tensor (`curriculum_kernels/<task>/cuda/problem.py`,
`curriculum_task`): at the example's 128x1024 (512 KiB a tensor) every variant's time is its launches
and the call's overhead, and on the H200 fast (0.060 ms) lost to eager (0.039 ms), so fast and slow both
got 1 and PPO had nothing to learn (bench/learning_gpu.sh, 2026-12-05). Per element eager moves 20 bytes
(mul: read x, write a temporary; add: read it and y, write out), fast and torch.compile's one fused kernel
12, slow 28 (copy x to out: 8; scale out in place: 8; add y: 12). At 128M elements that is 2.7 GB for
eager, 1.6 GB for fast, 3.8 GB for slow: at the H200's ~4.8 TB/s (3-4 reached) 0.6-0.9 ms, 0.35-0.55 ms
and 0.8-1.3 ms, far above the ~0.04-0.1 ms of fixed cost per call measured there. So fast beats eager
by ~1.6x (reward 2; 3 where it also beats compile by 5 %, which does the same traffic), slow is ~1.4x
slower than eager (1), wrong stays wrong (-1). The inputs are drawn on the GPU (`draw_inputs`), so the
size costs the judge memory (a few GiB), not time.

The CPU curriculum is sized for training on two CPU cores (bench/learning_gpu.sh, DEVICE=cpu): each
answer is one C++ file holding the loop and its `REGISTER_BINDING`, plus a short `model_new.py`
(about 230 tokens in all, not 550), and the prompt is a two-line instruction naming the task
(`CPU_SYSTEM`, about 60 tokens) instead of stage 1's 1,300-token prompt with the reference code. A
tiny random model reads neither; the length is what it costs to train on. The answers are still
real kernels that the real judge builds, checks and times for `examples/scale_add`. On CUDA the
curriculum keeps stage 1's prompt and the kernel/binding split. Supervised
fine-tuning on all three in equal shares (`sft.parquet`, verl's SFT trainer) makes the tiny model
answer with one of them at random; PPO on the single-turn prompt (`rl.parquet`, rewarded by the
real judge through `single_turn.compute_score`) must then shift that choice towards `fast`: the
mean reward rises from about (3 + 1 - 1) / 3 towards 2-3. `write_curriculum` writes both files and
each variant's candidate folder (`answers/<task>/<variant>`, for `cuda-agent judge`; on CUDA also the problem,
`tasks/<task>.py`).

    cuda-agent train curriculum --device cuda --out runs/curriculum
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent.errors import ConfigError
from cuda_agent.rl.data import rl_rows, write_rl_parquet
from cuda_agent.rl.single_turn import single_turn_messages, write_candidate
from cuda_agent.types import Task

KERNELS = Path(__file__).parent / "curriculum_kernels"
TASKS = ("scale_add",)
CPU_SYSTEM = (
    "Answer with a C++ solution: each file's path alone on a line, then the file in one fenced code block: "
    "kernels/<name>.cpp (the kernel and its REGISTER_BINDING), then model_new.py (ModelNew calling cuda_extension)."
)
"""The CPU curriculum's system prompt (see the module docstring: short, so that training on the CPU is cheap)."""
VARIANTS = {"fast": (2, 3), "slow": (1,), "wrong": (-1,)}
"""Variant -> the rewards the judge is designed to give it (fast: 3 where it also beats torch.compile)."""


@dataclass(frozen=True)
class Variant:
    """One hand-written answer of the curriculum."""

    task: str
    """Bundled example name, e.g. 'scale_add'."""
    ref: str
    """The reference of the task it is judged on (`curriculum_task`): examples/<task>, or curriculum/<task> on CUDA."""
    name: str
    """'fast', 'slow' or 'wrong'."""
    files: dict[str, str]
    """Workspace path -> text: the kernel, its binding, model_new.py (in answer order)."""

    def answer(self, device: str) -> str:
        """The single-turn answer: each file under its path, in the form the prompt asks for."""
        fence = {"py": "python", "cu": "cuda"}
        blocks = [
            f"{path}\n```{fence.get(path.rsplit('.', 1)[-1], 'cpp')}\n{text.rstrip()}\n```"
            for path, text in self.files.items()
        ]
        return "\n\n".join(blocks) + "\n"


def variants(device: str, tasks: tuple[str, ...] = TASKS) -> list[Variant]:
    """Every curriculum answer for `device` ('cpu' or 'cuda').

    Raises:
        ConfigError: a task has no curriculum kernels.
    """
    ext = "cu" if device == "cuda" else "cpp"
    out = []
    for task in tasks:
        folder = KERNELS / task
        if not (folder / device).is_dir():
            raise ConfigError(f"no curriculum kernels for {task!r} on {device}; have: {', '.join(TASKS)}")
        binding = folder / device / "binding.cpp"  # CUDA only: the CPU answers register in the kernel file
        ref = curriculum_task(task, device).ref
        for name in VARIANTS:
            files = {f"kernels/{task}.{ext}": (folder / device / f"{name}.{ext}").read_text()}
            if binding.is_file():
                files[f"kernels/{task}_binding.cpp"] = binding.read_text()
            files["model_new.py"] = (folder / device / "model_new.py").read_text()
            out.append(Variant(task=task, ref=ref, name=name, files=files))
    return out


def curriculum_task(task: str, device: str) -> Task:
    """The task the curriculum's answers for `task` are judged on: examples/<task>, or on CUDA the same problem at
    the sizes of `curriculum_kernels/<task>/cuda/problem.py` (module docstring) as `curriculum/<task>`.

    The reference is a name, not the file's path: the prompt shows it, and SFT and PPO (possibly on two machines,
    bench/learning_gpu.sh FROM=) must see the same prompt wherever the package lies. The rows carry the code, so
    the judge never resolves it; `write_curriculum` writes the problem file for `cuda-agent judge`.
    """
    sized = KERNELS / task / device / "problem.py"
    if sized.is_file():
        return Task(ref=f"curriculum/{task}", name=task, source="curriculum", code=sized.read_text())
    from cuda_agent.tasks import Catalog

    return Catalog().resolve(f"examples/{task}")


def prompt_messages(task: Task, device: str) -> list[dict[str, str]]:
    """The curriculum's prompt for `task`: stage 1's on CUDA, two short lines on the CPU (module docstring)."""
    if device == "cuda":
        return single_turn_messages(task, device)
    return [
        {"role": "system", "content": CPU_SYSTEM},
        {"role": "user", "content": f"Task {task.ref}: write ModelNew, correct and faster than torch.compile."},
    ]


def corpus(device: str) -> list[str]:
    """The curriculum's texts (prompts and answers), for training a tiny model's tokenizer on them."""
    texts = [m["content"] for task in TASKS for m in prompt_messages(curriculum_task(task, device), device)]
    return texts + [v.answer(device) for v in variants(device)]


def write_curriculum(out: Path, device: str, copies: int = 8) -> dict[str, Any]:
    """Write the curriculum's data under `out`: sft.parquet, rl.parquet, answers/<task>/<variant>/, curriculum.json.

    Args:
        out: the folder.
        device: 'cuda' (the H200) or 'cpu' (CI); the prompt and the kernels follow it.
        copies: rows per variant in sft.parquet (equal shares: SFT learns to pick each a third of the time).

    Returns:
        The manifest written to curriculum.json: the data's paths and per answer ('<task>:<variant>') what to
        judge it on (examples/<task>, or on CUDA the problem written to tasks/<task>.py), its folder and its
        designed rewards.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    tasks = {task: curriculum_task(task, device) for task in TASKS}
    out.mkdir(parents=True, exist_ok=True)
    judge_on = {}  # what `cuda-agent judge` takes: a bundled example's reference, or the problem written here
    for name, task in tasks.items():
        if task.source == "curriculum":
            (out / "tasks").mkdir(exist_ok=True)
            (out / "tasks" / f"{name}.py").write_text(task.code)
            judge_on[name] = str(out / "tasks" / f"{name}.py")
        else:
            judge_on[name] = task.ref
    rl_data = rl_rows(list(tasks.values()), single_turn=True, device=device)
    for row, task in zip(rl_data, tasks.values(), strict=True):
        row["prompt"] = prompt_messages(task, device)
    rl = write_rl_parquet(rl_data, out / "rl.parquet")
    rows, answers = [], {}
    for variant in variants(device):
        prompt = prompt_messages(tasks[variant.task], device)
        messages = [*prompt, {"role": "assistant", "content": variant.answer(device)}]
        rows += [{"messages": messages, "task": variant.ref, "variant": variant.name}] * copies
        folder = write_candidate(variant.files, out / "answers" / variant.task / variant.name)
        rewards = list(VARIANTS[variant.name])
        answers[f"{variant.task}:{variant.name}"] = {
            "task": judge_on[variant.task],
            "folder": str(folder),
            "rewards": rewards,
        }
    sft = out / "sft.parquet"
    pq.write_table(pa.Table.from_pylist(rows), sft)
    manifest = {"device": device, "rl": str(rl), "sft": str(sft), "answers": answers}
    (out / "curriculum.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest
