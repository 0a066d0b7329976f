"""Verdicts of candidates judged before, keyed by everything the verdict depends on.

RL groups repeat themselves: the same bytes come back for the same task many times. Judging them
again costs a build lookup, a fresh process and seconds of a GPU slot for an answer we already
have. The key covers the task's code, the candidate's content (single file or workspace files),
the judge configuration, the judge's own code, torch, CUDA, the compilers, the driver, the device name
and the user the candidate actually ran as, so any change to any of them is a miss (a verdict judged
unconfined, where confinement was asked for but could not be had, never answers a confined judgement).

Only deterministic outcomes are stored (see `_Judgement.cacheable` in pipeline.py): passes, wrong
answers, rejections, compile errors and crashes inside the candidate's own calls. Timeouts, a
process that died, and out-of-memory errors depend on what else ran on the machine, so they are
judged again. A cached pass carries the timings of its first measurement; `env.verdict_cached`
says so, and `env.cached_from` holds when and how long that measurement took.

Entries are written atomically (a temporary file renamed into place), so concurrent judges may
write the same key at once and a reader never sees half a file.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cuda_agent.judge.config import JudgeConfig
from cuda_agent.judge.env import PROTOCOL_VERSION
from cuda_agent.machine import toolchain, torch_versions
from cuda_agent.types import Verdict

_UNKEYED = {"cache_dir", "timing_lock", "verdict_cache"}
"""Config fields that change where things are kept or how turns are taken, never what a verdict says."""


@functools.cache
def judge_code_hash() -> str:
    """sha256 over the source of every package a verdict depends on, so a changed judge misses the cache."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for folder in ("judge", "workspace", "tasks"):
        for path in sorted((package / folder).rglob("*")):
            if path.is_file() and path.suffix in (".py", ".cpp", ".h", ".cu", ".md", ".sh"):
                digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    digest.update((package / "reward.py").read_bytes())
    return digest.hexdigest()


def verdict_key(
    task_code: str,
    content_hash: str,
    config: JudgeConfig,
    device: str,
    machine: dict[str, Any],
    confined_as: str | None,
) -> str:
    """The cache key of one judgement.

    Args:
        task_code: the task's source.
        content_hash: the candidate's content (`SolutionSource.content_hash`).
        config: the judge settings (fields that do not change verdicts are left out).
        device: the resolved device, 'cuda' or 'cpu'.
        machine: device name, driver and anything else of the machine the verdict depends on.
        confined_as: the user the candidate's code runs as, None where it runs as ours (whatever was asked).
    """
    settings = config.model_dump(mode="json", exclude=_UNKEYED) | {"device": device}
    key = {
        "task": hashlib.sha256(task_code.encode()).hexdigest(),
        "solution": content_hash,
        "config": settings,
        "judge": judge_code_hash(),
        "protocol_version": PROTOCOL_VERSION,
        **torch_versions(),
        "toolchain": toolchain(),
        "confined_as": confined_as,
        **machine,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


class VerdictCache:
    """Verdicts on disk under `root`, one JSON file per key."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str, task_ref: str) -> Verdict | None:
        """The stored verdict for `key`, marked as cached and named for `task_ref`; None on a miss."""
        start = time.monotonic()
        path = self._path(key)
        try:
            stored = json.loads(path.read_text())
            verdict = Verdict.model_validate(stored["verdict"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError):  # a damaged entry is a miss; the next store replaces it
            return None
        cached_from = {"at": stored.get("at"), "stage_s": verdict.stage_s}
        return verdict.model_copy(
            update={
                "task": task_ref,
                "env": {**verdict.env, "verdict_cached": True, "cached_from": cached_from},
                "stage_s": {"verdict_cache": time.monotonic() - start},
            }
        )

    def put(self, key: str, verdict: Verdict) -> None:
        """Store `verdict` under `key` (atomically; the last of concurrent writers wins, all wrote the same)."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {"at": datetime.now(UTC).isoformat(timespec="seconds"), "verdict": verdict.model_dump(mode="json")}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(record, f)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
