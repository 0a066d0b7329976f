"""Trajectories as JSONL, written as the episode runs so a crash loses at most the turn in flight.

Layout, one JSON object per line:
    {"type": "header", "task": ..., "model": ..., "prompt": [...], "tools": [...], "started_at": ..., "metadata": {...}}
    {"type": "turn", "index": 0, "content": ..., "tool_calls": [...], "tool_results": [...], ...}   (one per turn)
    {"type": "end", "verdict": {...}, "reward": 3, "exit_status": "finished", "terminated": true, "truncated": false,
     "judge_error": null}

`read_trajectory` rebuilds a `Trajectory` (types.py); a file without its end line (the writer
crashed) reads back with `complete=False`, and a half-written last line is skipped.
"""

from __future__ import annotations

import json
import logging
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

from cuda_agent.errors import Error
from cuda_agent.types import Trajectory, Turn, Verdict

logger = logging.getLogger(__name__)

_HEADER_FIELDS = ("task", "model", "prompt", "tools", "started_at", "metadata")
_END_FIELDS = ("verdict", "reward", "exit_status", "terminated", "truncated", "judge_error")


class TrajectoryError(Error):
    """A trajectory file cannot be read (missing, not JSONL, no header)."""


class TrajectoryWriter:
    """Appends one episode to a JSONL file, flushing every line to disk.

    Args:
        path: the .jsonl file (created, or replaced if it exists; parent folders are created).
        task, model: task reference and model name.
        prompt: the messages before the first turn (system prompt, task statement).
        tools: the tool schemas offered to the model.
        metadata: anything a reader needs (config, workspace path, versions).

    Example:
        >>> with TrajectoryWriter(out / "trajectory.jsonl", task.ref, model.name, prompt, schemas) as writer:
        ...     writer.append(model_turn.to_turn(i, results, model_s, tools_s))  # doctest: +SKIP
        ...     writer.finish(verdict=verdict, reward=verdict.reward, exit_status="finished", terminated=True)
    """

    def __init__(
        self,
        path: Path,
        task: str,
        model: str,
        prompt: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("w", encoding="utf-8")
        self.turns = 0
        started_at = datetime.now(UTC).isoformat(timespec="seconds")
        header = Trajectory(
            task=task, model=model, prompt=prompt, tools=tools or [], started_at=started_at, metadata=metadata or {}
        )
        self._write({"type": "header", **header.model_dump(include=set(_HEADER_FIELDS))})

    def append(self, turn: Turn) -> None:
        """Write one finished turn."""
        self._write({"type": "turn", **turn.model_dump()})
        self.turns += 1

    def finish(
        self,
        verdict: Verdict | None = None,
        reward: float | None = None,
        exit_status: str | None = None,
        terminated: bool = False,
        truncated: bool = False,
        judge_error: str | None = None,
    ) -> None:
        """Write the end line and close the file; `judge_error` says why there is no verdict (a failure of ours)."""
        end = {"verdict": verdict.model_dump(mode="json") if verdict else None, "reward": reward}
        end |= {"exit_status": exit_status, "terminated": terminated, "truncated": truncated}
        self._write({"type": "end", **end, "judge_error": judge_error})
        self.close()

    def _write(self, record: dict[str, Any]) -> None:
        if self._file.closed:
            raise TrajectoryError(f"{self.path} is already finished; start a new TrajectoryWriter")
        self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def read_trajectory(path: Path) -> Trajectory:
    """Read a trajectory JSONL file back into a `Trajectory`.

    Raises:
        TrajectoryError: the file is missing, empty, has no header line, or a line in the middle is broken.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise TrajectoryError(f"cannot read trajectory {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise TrajectoryError(f"{path} is not a text file; give the trajectory.jsonl an episode wrote") from exc
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if number == len(lines):
                logger.warning("%s: skipping a half-written last line (the episode was interrupted)", path)
                continue
            raise TrajectoryError(f"{path}:{number} is not JSON ({exc}); the file is damaged") from exc
    if not records or not all(isinstance(r, dict) for r in records) or records[0].get("type") != "header":
        raise TrajectoryError(f"{path} does not start with a trajectory header line; is it a cuda-agent trajectory?")
    fields = {key: records[0][key] for key in _HEADER_FIELDS if key in records[0]}
    turns = [
        Turn.model_validate({k: v for k, v in r.items() if k != "type"}) for r in records if r.get("type") == "turn"
    ]
    ends = [r for r in records if r.get("type") == "end"]
    if ends:
        fields.update({key: ends[-1][key] for key in _END_FIELDS if key in ends[-1]})
    verdict = fields.get("verdict")
    if isinstance(verdict, dict) and verdict.get("verdict") == "error":  # files from before judge_error existed
        fields.update(verdict=None, judge_error=str(verdict.get("message", "")))
    return Trajectory(**fields, turns=turns, complete=bool(ends))
