"""The machine-readable result of the workspace's checks: one JSON line per `utils.verification` or
`utils.profiling` run, appended to a file the episode runner names in the tools' environment.

The file lies outside the workspace (the agent's file tools cannot reach it; its shell can, see
agent/loop.py for why that costs at most one extra judgement). The agent loop reads the lines
added by each tool call and snapshots the workspace when a check passed on the kernels it holds
now: printed text ('verification: PASS') is for the model and triggers nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import stat
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.types import VerdictName
from cuda_agent.workspace.layout import is_editable, walk

CHECKS_FILE_ENV = "CUDA_AGENT_CHECKS_FILE"


class WorkspaceCheck(BaseModel):
    """One check of the workspace by its tools."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: Literal["verification", "profiling"] = Field(description="Which tool checked.")
    verdict: VerdictName = Field(description="The judge's verdict on the workspace.")
    correct: bool = Field(description="All correctness checks passed.")
    reward: int = Field(description="The judge's reward (profiling; verification never times, so at most 1).")
    digest: str = Field(description="editable_digest of the workspace when it was checked: which kernels passed.")

    @property
    def score(self) -> int | None:
        """How good the checked workspace is for a snapshot: the profiled reward, 1 for a verified PASS."""
        if not self.correct:
            return None
        return self.reward if self.tool == "profiling" else 1


def editable_digest(root: Path) -> str:
    """sha256 over the editable files of a workspace (names and bytes): equal digests, equal candidates. A workspace
    that cannot be read whole (`walk`, or a file gone as it was read) gets a digest of its own that no check holds."""
    digest = hashlib.sha256()
    paths, failed = walk(root)
    try:
        for path in paths if failed is None else []:
            rel = path.relative_to(root).as_posix()
            if path.is_file() and is_editable(rel):
                digest.update(rel.encode(errors="surrogateescape") + b"\0" + path.read_bytes())  # a name's own bytes
    except OSError:
        failed = OSError()
    return digest.hexdigest() if failed is None else f"unreadable-{secrets.token_hex(16)}"


def record_check(check: WorkspaceCheck, path: str | None = None) -> None:
    """Append `check` to the file the environment names; nothing when none is named (a user's own shell)."""
    path = path or os.environ.get(CHECKS_FILE_ENV)
    if path:
        with open(path, "a") as out:
            out.write(check.model_dump_json() + "\n")


class CheckReader:
    """Reads the checks appended to one file since the last read."""

    def __init__(self, path: Path) -> None:
        self.path, self._offset = path, 0

    def new(self) -> list[WorkspaceCheck]:
        """Checks appended since the last call; lines that are not a check (a torn or foreign write) are skipped."""
        if not self.path.exists():
            return []
        with self.path.open("rb") as src:
            src.seek(self._offset)
            data = src.read()
        end = data.rfind(b"\n") + 1  # a line still being written is read next time
        self._offset += end
        checks = []
        for line in data[:end].splitlines():
            try:
                checks.append(WorkspaceCheck.model_validate(json.loads(line)))
            except ValueError:  # pydantic's ValidationError and json's errors are ValueErrors
                continue
        return checks


SNAPSHOT_SKIPS = ("build", "__pycache__")


def snapshot(root: Path, dest: Path) -> bool:
    """Copy the workspace as the agent left it: its links as links (the judge refuses them there as in the
    workspace; copied through, a link's target, any file this process may read, became the snapshot's source), and
    no special file (a FIFO, a socket: nothing to judge, and the copy raised on one, ending the episode as ours).
    Whether it was copied whole: a tree it cannot copy (changed as it was copied, too deep) leaves no snapshot."""

    def skipped(folder: str, names: list[str]) -> set[str]:
        return {name for name in names if name in SNAPSHOT_SKIPS or _special(Path(folder, name))}

    try:
        shutil.copytree(root, dest, symlinks=True, ignore=skipped, dirs_exist_ok=True)
    except (OSError, shutil.Error):
        shutil.rmtree(dest, ignore_errors=True)
        return False
    return True


def _special(path: Path) -> bool:
    """Neither a file, a folder nor a link (unreadable, or gone since it was listed: left out too)."""
    try:
        mode = path.lstat().st_mode
    except OSError:
        return True
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode))
