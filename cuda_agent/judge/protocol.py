"""Messages between the grader and its child processes (written as JSON files, never via stdout)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.types import Violation


class RunRequest(BaseModel):
    """What the candidate process must do. Frozen, its lists tuples: the candidate's code shares the process (a
    red-team solution, 2026-12-05, reached it through frames and raised the tolerances)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_code: str
    task_name: str
    solution_path: str
    ext_dir: str
    python_path: tuple[str, ...] = Field(
        default_factory=tuple, description="Folders put first on sys.path (a workspace's built module)."
    )
    device: Literal["cuda", "cpu"]
    seeds: tuple[int, ...] = Field(description="One correctness trial per seed.")
    robustness: bool = Field(description="Add sign-flipped and rescaled input trials.")
    time: bool
    timing_seed: int
    recheck_seed: int
    atol: float
    rtol: float
    norm_rtol: float
    strict_precision: bool
    precision_factor: float
    precision_floor: float
    warmup_reps: int
    min_reps: int
    max_reps: int
    target_phase_s: float
    screen_min_elems: int
    """Timed outputs this large are screened at sampled positions first (JudgeConfig.screen_min_elems)."""
    policy: Literal["cuda-agent", "kernelbench"] = "cuda-agent"
    """'kernelbench': torch compute in forward is allowed, but the candidate's kernels must reach its outputs."""


Status = Literal["ok", "runtime_error", "incorrect", "rejected", "task_error", "judge_error"]
"""The candidate's outcomes, then two that are no verdict: the reference failed before the candidate ran
('task_error'), and our own code failed in the worker ('judge_error'). The candidate shares the worker's
process, so once its code ran the grader trusts neither of these two except our own out-of-memory."""


class RunResult(BaseModel):
    """What the candidate process found; the grader turns it into a Verdict."""

    model_config = ConfigDict(extra="forbid")

    status: Status
    message: str = ""
    out_of_memory: bool = False
    """An allocation failed (torch's OutOfMemoryError, MemoryError, the CPU allocator's refusal): in the candidate's
    call (a runtime_error, judged again next time: whether it fits depends on what else held memory), or in our
    own code (a judge_error, retried once alone)."""
    stage: str = Field(default="", description="Where it stopped: import, init, trial, timing, recheck.")
    violations: list[Violation] = Field(default_factory=list)
    trials: list[dict[str, Any]] = Field(default_factory=list)
    timing: dict[str, Any] | None = None
    flags: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, Any] = Field(default_factory=dict)
    stage_s: dict[str, float] = Field(default_factory=dict)
    custom_kernel_time_fraction: float | None = Field(
        default=None, description="Share of a profiled forward's time in the candidate's own code (policy/runtime.py)."
    )


class BaselineRequest(BaseModel):
    """What the baseline process must time (no candidate code is loaded there)."""

    model_config = ConfigDict(extra="forbid")

    task_code: str
    task_name: str
    device: Literal["cuda", "cpu"]
    timing_seed: int
    compile_mode: str | None
    warmup_reps: int
    min_reps: int
    max_reps: int
    target_phase_s: float
    timing_lock: str | None = None
    """Path of a file held with flock around each timed phase (parallel baseline runs share a GPU)."""
    gpu_turns: str | None = None
    """Folder of the GPU's turns (gpu_turns.py): the process takes a shared turn to set up and build, an exclusive
    one to time. None: the caller holds the process's turn."""


class BaselineResult(BaseModel):
    """Eager and torch.compile timings of a reference."""

    model_config = ConfigDict(extra="forbid")

    eager: dict[str, Any] | None = None
    compile: dict[str, Any] | None = None
    compile_error: str | None = None
    error: str | None = None
    gpu_held_s: float | None = None
    """Seconds it held its exclusive turn (with `gpu_turns`), and waited for its turns."""
    gpu_wait_s: float | None = None
    flags: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, Any] = Field(default_factory=dict)
