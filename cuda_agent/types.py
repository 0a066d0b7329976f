"""Records that cross stage and process boundaries.

Every record here is a pydantic model that round-trips through JSON, so it can be written to
disk, sent between processes and read back by a later stage without loss.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Task(_Record):
    """One KernelBench-format problem: a `Model`, `get_inputs()` and `get_init_inputs()`."""

    ref: str = Field(description="Stable reference, e.g. 'kernelbench/L1/19', 'ops6k/123' or a file path.")
    name: str = Field(description="Human name, e.g. '19_ReLU' or the file stem.")
    source: str = Field(description="Where it came from: 'kernelbench', 'ops6k', 'examples', 'file', 'folder', ...")
    level: int | None = Field(default=None, description="KernelBench level (1-3) where the source has levels.")
    problem_id: int | None = Field(default=None, description="Problem number within the level, or the row index.")
    code: str = Field(description="The whole problem file as Python source.")
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Source-specific facts, e.g. Ops-6K's 'ops' list and 'data_source'."
    )

    @property
    def code_hash(self) -> str:
        """sha256 of the problem source; keys every cache that depends on the task."""
        return hashlib.sha256(self.code.encode()).hexdigest()


class TensorSpec(_Record):
    """Shape and dtype of one tensor argument or output (or the repr of a non-tensor value)."""

    kind: Literal["tensor", "value"] = Field(description="'tensor' for torch.Tensor, 'value' for anything else.")
    shape: list[int] | None = Field(default=None, description="Tensor shape; None for non-tensors.")
    dtype: str | None = Field(default=None, description="Tensor dtype, e.g. 'torch.float32'.")
    repr: str | None = Field(default=None, description="Short repr of a non-tensor value.")


class TaskInspection(_Record):
    """What running a task's code once, in a child process, showed."""

    init_inputs: list[TensorSpec] = Field(description="Constructor arguments from get_init_inputs().")
    inputs: list[TensorSpec] = Field(description="Forward arguments from get_inputs().")
    outputs: list[TensorSpec] = Field(description="Outputs of Model(*init)(*inputs), flattened.")
    parameter_count: int = Field(description="Number of scalar parameters in the Model.")
    deterministic: bool = Field(description="Same inputs and weights gave bit-identical outputs twice.")
    input_dependent: bool = Field(description="Two different input draws gave different outputs.")
    forward_ms: float = Field(description="Wall time of one eager forward on the inspection device, in ms.")
    device: str = Field(description="Device the inspection ran on.")


class Violation(_Record):
    """One reason a candidate was rejected."""

    check: str = Field(description="Name of the rule, e.g. 'torch_compute_in_forward'.")
    message: str = Field(description="What was found and where, in words the author can act on.")


class Timings(_Record):
    """Median times of the timed phases, in milliseconds; None where not measured."""

    solution: float | None = Field(default=None, description="Candidate median time per call (ms).")
    eager: float | None = Field(default=None, description="Reference eager median time per call (ms).")
    compile: float | None = Field(default=None, description="Reference torch.compile median time per call (ms).")


VerdictName = Literal["pass", "compile_error", "runtime_error", "incorrect", "rejected", "timeout"]


class Verdict(_Record):
    """The judge's answer for one candidate (DESIGN.md section 3)."""

    task: str = Field(description="Reference of the task judged.")
    verdict: VerdictName = Field(description="Outcome; 'pass' means compiled, correct and timed.")
    reward: int = Field(description="Paper reward in {-1, 1, 2, 3}; -1 whenever verdict != 'pass'.")
    correct: bool = Field(description="All correctness checks passed.")
    message: str = Field(default="", description="One-paragraph explanation for the author.")
    violations: list[Violation] = Field(default_factory=list, description="Rules broken, if rejected.")
    timings_ms: Timings = Field(default_factory=Timings, description="Median times per phase.")
    speedup_vs_eager: float | None = Field(default=None, description="eager / solution; None unless timed.")
    speedup_vs_compile: float | None = Field(default=None, description="compile / solution; None unless timed.")
    device: str = Field(default="cpu", description="Device name, e.g. 'NVIDIA H200' or 'cpu'.")
    compile_log: str | None = Field(default=None, description="Trimmed compiler output on a compile error.")
    checks: list[dict[str, Any]] = Field(default_factory=list, description="Per-trial correctness figures.")
    stage_s: dict[str, float] = Field(default_factory=dict, description="Wall time per judge stage, in seconds.")
    env: dict[str, Any] = Field(default_factory=dict, description="torch, CUDA, driver, flags, protocol version.")
