"""The baselines stage: the reference's eager and torch.compile timings, measured once per key and cached on disk.

A part of pipeline.py's `_Judgement` kept in a module of its own (the pipeline's line budget), as watched.py is
for the run stage: it reads and records the judgement's state (`j.cfg`, `j.env`, `j.stage_s`) as a method would.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from cuda_agent.errors import JudgeInfraError
from cuda_agent.gpu_turns import turns_for
from cuda_agent.judge.child import baseline as baseline_mod
from cuda_agent.judge.config import JudgeConfig
from cuda_agent.judge.env import PROTOCOL_VERSION
from cuda_agent.judge.protocol import BaselineRequest, BaselineResult
from cuda_agent.machine import gpu_name, torch_versions
from cuda_agent.types import Verdict

if TYPE_CHECKING:
    from cuda_agent.judge.pipeline import _Judgement


def measure_baselines(j: _Judgement, workdir: Path, group_calls: int | None = None) -> BaselineResult:
    """Judgement `j`'s reference timed eager and under torch.compile (from the cache when measured before), in groups
    of `group_calls` calls, as the candidate's run made its requests (None: no run; the process chooses).

    Raises:
        JudgeInfraError: timing the reference failed (ours: the candidate's run has just run it).
    """
    cfg = j.cfg
    cache_file = j.baseline_file()
    # The copy read before the candidate's code ran (`_Judgement.run`); a file that appeared while it ran is not
    # trusted (its code may have written it) and is measured again. Without a run (reference timings alone), now.
    before = j.baseline_before if j.baseline_read else j.cached_baseline()
    if before is not None:
        j.env["baseline_cached"] = True
        return before
    # The process takes its own turns (shared to build, exclusive to time: child/baseline.py), but beside a
    # timing lock, where parallel baseline runs share one turn and time by the lock.
    own_turns = j.device == "cuda" and cfg.timing_lock is None
    request = BaselineRequest(
        task_code=j.task.code,
        task_name=j.task.name,
        device=j.device,
        compile_mode=cfg.compile_mode,
        warmup_reps=cfg.warmup_reps,
        min_reps=cfg.min_reps,
        max_reps=cfg.max_reps,
        target_phase_s=cfg.target_phase_s,
        ci_width=cfg.timing_ci_width,
        max_phase_s=cfg.max_phase_s,
        timing_lock=str(cfg.timing_lock) if cfg.timing_lock else None,
        gpu_turns=str(turns_for(cfg.cache_dir).folder) if own_turns else None,
        group_calls=group_calls,
        max_group_calls=cfg.max_group_calls,
        release_per_call=cfg.release_per_call and j.device == "cpu",
    )
    # With its own turns, its waits for them count in baseline_timeout_s (900 s; others' turns last seconds, a
    # hung candidate's at most about a minute); a timeout is our failure, never the candidate's.
    result = j.run_child(
        "cuda_agent.judge.child.baseline",
        request,
        BaselineResult,
        workdir,
        cfg.baseline_timeout_s,
        {},
        stage="baselines",
        turn=not own_turns,
    )
    if isinstance(result, Verdict):
        raise JudgeInfraError(f"timing the reference failed: {result.message}")
    if own_turns:
        j.count_turn("baselines", result.gpu_wait_s or 0.0, result.gpu_held_s or 0.0)
    if result.error:
        # The candidate's run has just run this reference: a failure to time it is ours, not the candidate's.
        raise JudgeInfraError(f"{j.task.ref}: timing the reference failed: {result.error}")
    j.env["baseline_cached"] = False
    cache_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache_file.with_suffix(".tmp")
    tmp.write_text(result.model_dump_json())
    tmp.replace(cache_file)  # atomic, so a concurrent reader never sees half a file
    return result


def baseline_key_env(device: str, config: JudgeConfig) -> tuple[str, dict[str, Any]]:
    """The device name and the facts a task's baseline cache key holds besides the task (its one definition).

    Args:
        device: the resolved device, 'cuda' or 'cpu'.
        config: the judge settings (the CPU threads a CPU timing runs on).

    Returns:
        The device name ('cpu' on the CPU) and {torch, cuda, protocol_version, cpu_threads}.
    """
    versions = torch_versions()  # read from torch's files: importing torch here would cost seconds
    key_env = {
        "torch": versions["torch"],
        "cuda": versions["cuda"] if device == "cuda" else None,
        "protocol_version": PROTOCOL_VERSION,
        "cpu_threads": config.cpu_threads if device != "cuda" else None,
        "max_group_calls": config.max_group_calls,
        "release_per_call": config.release_per_call and device != "cuda",
    }
    return (gpu_name() if device == "cuda" else "cpu"), key_env


def baseline_key(task_code: str, device: str, config: JudgeConfig) -> str:
    """The key under which a task's eager and compile timings are cached on this machine (`cache_dir/baselines/`).

    Args:
        task_code: the task's source.
        device: the resolved device, 'cuda' or 'cpu'.
        config: the judge settings (the compile mode, the CPU threads a CPU timing runs on).
    """
    name, key_env = baseline_key_env(device, config)
    return baseline_mod.cache_key(task_code, name, key_env, {"tf32": False}, config.compile_mode)
