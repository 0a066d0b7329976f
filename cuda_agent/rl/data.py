"""Task sets as verl's RL parquet: one row per task, in the columns verl's `RLHFDataset` reads.

    rows = rl_rows(tasks, single_turn=False, device="cuda")
    write_rl_parquet(rows, Path("runs/data/ops6k.parquet"))

Columns:
- `prompt`: chat messages. Single-turn rows hold the stage's own prompt (`single_turn_messages`),
  which verl's `single_turn_agent` sends as it is. Agent rows hold SKILL.md and the task line; the
  `cuda_agent` loop renders its own first prompt from the workspace (the same text plus the tool
  schemas), so this copy only serves verl's prompt-length filter and logs.
- `data_source`: the set and level, e.g. `kernelbench/L1`, `ops6k`: verl reports validation
  metrics per data source, so KernelBench comes out per level.
- `reward_model`: `{"style": "rule", "ground_truth": <task reference>}` (verl's reward managers read it).
- `extra_info`: `index`, `task` (reference), `code` (the problem source, so no worker needs the
  task files), `name`, `level`, `device`, `language` (the kernel language the prompt asks for).
- `agent_name`: `cuda_agent` (collect, critic warm-up, agentic PPO) or `single_turn_agent` (stage 1).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cuda_agent.agent.prompt import task_prompt
from cuda_agent.errors import ConfigError
from cuda_agent.rl.single_turn import single_turn_messages
from cuda_agent.types import Language, Task
from cuda_agent.workspace.layout import skill_text

DATA_DIR = Path("runs/data")
"""Where `cuda-agent train data` writes by default; the bundled recipes read from here."""


def default_out(
    suite: str, single_turn: bool, levels: Sequence[int] | None = None, language: Language = "cuda"
) -> Path:
    """The parquet path for a suite: runs/data/<suite>[_L<levels>][_single_turn][_triton].parquet.

    Example:
        >>> default_out("ops6k", False), default_out("kernelbench", True, [1, 2])
        (PosixPath('runs/data/ops6k.parquet'), PosixPath('runs/data/kernelbench_L12_single_turn.parquet'))
        >>> default_out("ops6k", True, language="triton")
        PosixPath('runs/data/ops6k_single_turn_triton.parquet')
    """
    name = re.sub(r"[^A-Za-z0-9]+", "_", suite).strip("_") or "tasks"
    if levels:
        name += "_L" + "".join(str(level) for level in sorted(levels))
    return (
        DATA_DIR / f"{name}{'_single_turn' if single_turn else ''}{'_triton' if language == 'triton' else ''}.parquet"
    )


def _data_source(task: Task) -> str:
    """The set a task came from, as its reference names it ('kernelbench', 'ops6k', 'examples', 'mydir'), and its level."""
    if "::" in task.ref:
        name = Path(task.ref.split("::", 1)[0]).name
    elif task.ref.startswith(("/", ".", "~")):
        name = task.source
    else:
        name = task.ref.split("/", 1)[0]
    return f"{name}/L{task.level}" if task.level is not None else name


def rl_rows(tasks: Sequence[Task], single_turn: bool, device: str, language: Language = "cuda") -> list[dict[str, Any]]:
    """One verl RL row per task (see the module docstring for the columns).

    Args:
        tasks: the problems, e.g. from `cuda_agent.evaluation.suites.select_tasks`.
        single_turn: rows for stage 1 (`single_turn_agent` and its prompt), else for the agent loop.
        device: 'cuda' or 'cpu', the kernel kind the prompt asks for.
        language: the kernel language the prompt asks for: 'triton' asks single-turn rows for one `model_new.py`
            with `@triton.jit` kernels (their reward judges them as Triton), agent-loop rows for a Triton workspace
            (the agent loop's `language` must match).
    """
    skill = skill_text(device, language)
    rows = []
    for index, task in enumerate(tasks):
        if single_turn:
            prompt = single_turn_messages(task, device, language)
        else:
            prompt = [
                {"role": "system", "content": skill},
                {"role": "user", "content": task_prompt(task.ref, language)},
            ]
        rows.append(
            {
                "data_source": _data_source(task),
                "prompt": prompt,
                "ability": "cuda",
                "reward_model": {"style": "rule", "ground_truth": task.ref},
                "extra_info": {
                    "index": index,
                    "task": task.ref,
                    "code": task.code,
                    "name": task.name,
                    "level": task.level,
                    "device": device,
                    "language": language,
                },
                "agent_name": "single_turn_agent" if single_turn else "cuda_agent",
            }
        )
    return rows


def write_rl_parquet(rows: Sequence[dict[str, Any]], out: Path) -> Path:
    """Write rows as parquet with a fixed schema (a set without levels still has an int `level` column).

    Raises:
        ConfigError: no rows, or the file cannot be written.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not rows:
        raise ConfigError("no tasks to write: check --suite and --levels")
    text = pa.string()
    schema = pa.schema(
        [
            ("data_source", text),
            ("prompt", pa.list_(pa.struct([("role", text), ("content", text)]))),
            ("ability", text),
            ("reward_model", pa.struct([("style", text), ("ground_truth", text)])),
            (
                "extra_info",
                pa.struct(
                    [
                        ("index", pa.int64()),
                        ("task", text),
                        ("code", text),
                        ("name", text),
                        ("level", pa.int64()),
                        ("device", text),
                        ("language", text),
                    ]
                ),
            ),
            ("agent_name", text),
        ]
    )
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(list(rows), schema=schema), out)
    except OSError as exc:
        raise ConfigError(f"cannot write {out}: {exc}") from exc
    return out
