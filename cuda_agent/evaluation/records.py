"""Records of a benchmark run: its settings, one result per task, the metrics and the whole report.

Every record is a pydantic model, so a run's JSONL of task results and its results.json round-trip
through JSON and a report can be rebuilt from them alone (`cuda-agent bench report DIR`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.types import Language, Verdict


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BenchConfig(_Record):
    """What a run judges and how; recorded in results.json so a reader can repeat it."""

    suite: str = Field(description="kernelbench, kernelbench/L2, ops6k[0:100], examples, or a folder of problems.")
    levels: list[int] | None = Field(default=None, description="Only these KernelBench levels (None: all).")
    solutions: str | None = Field(default=None, description="Folder of solutions, or 'examples'; None with a model.")
    model: str | None = Field(default=None, description="Model spec the agent ran with; None when judging solutions.")
    device: Literal["auto", "cuda", "cpu"] = Field(default="auto", description="Where candidates run.")
    workers: int = Field(default=1, ge=1, description="Parallel build workers (timing is always exclusive).")
    max_turns: int = Field(default=200, ge=1, description="Turn limit per episode (paper: 200 in evaluation).")
    language: Language = Field(
        default="cuda", description="Kernel language the agent writes (a model), or of `--solutions examples`."
    )
    judge: dict[str, Any] = Field(default_factory=dict, description="JudgeConfig overrides, e.g. target_phase_s.")
    speed_of_light: bool = Field(default=True, description="Estimate each task's speed-of-light bound.")


TaskStatus = Literal["judged", "missing", "failed", "error"]


class SpeedOfLight(_Record):
    """A task's lower bound on time: max(minimum bytes / copy bandwidth, FLOPs / matmul peak)."""

    bytes_moved: int | None = Field(default=None, description="Inputs + outputs + parameters, each touched once.")
    flops: int | None = Field(default=None, description="FLOPs FlopCounterMode counts (matmul/conv-like ops only).")
    bound_ms: float | None = Field(default=None, description="Lower bound on time with the device's ceilings, ms.")
    limited_by: Literal["memory", "compute"] | None = Field(default=None, description="Which term sets the bound.")
    how: str = Field(default="", description="'meta' (shapes only) or 'cpu' (small real tensors) or why none.")


class Ceilings(_Record):
    """Device ceilings the bounds use, and where each figure comes from."""

    device: str = Field(description="Device name, e.g. 'NVIDIA H200' or 'cpu'.")
    copy_bytes_per_s: float = Field(description="Copy bandwidth, bytes read + written per second.")
    flops_per_s: float = Field(description="FP32 matmul rate (no tensor cores), FLOP per second.")
    source: str = Field(description="Measured here, or the document the constants come from.")


class TaskResult(_Record):
    """One task's outcome; a line of results.jsonl as soon as the task finishes."""

    ref: str = Field(description="Task reference, e.g. 'kernelbench/L1/19'.")
    name: str = Field(description="Task name.")
    level: int | None = Field(default=None, description="KernelBench level, if any.")
    source: str = Field(default="", description="The task's set: 'kernelbench', 'ops6k', 'examples', 'folder', ...")
    status: TaskStatus = Field(
        description="judged; missing (no solution) or failed (the input was wrong, e.g. a SolutionError): both count "
        "as failed; error (ours, an InfraError): left out of every rate."
    )
    solution: str | None = Field(default=None, description="Solution file or folder judged.")
    verdict: Verdict | None = Field(default=None, description="The scored verdict (with a model: best in trajectory).")
    final: Verdict | None = Field(default=None, description="With a model: the verdict of the final workspace.")
    error: str | None = Field(default=None, description="Why no verdict was reached (status failed or error).")
    episode: dict[str, Any] | None = Field(default=None, description="With a model: trajectory, turns, exit status.")
    wall_s: float = Field(default=0.0, description="Seconds from submitting the task to its result (queue included).")
    speed_of_light: SpeedOfLight | None = Field(default=None, description="The task's lower bound on time.")


class GroupMetrics(_Record):
    """The paper's metrics over one group of tasks (all, or one level); fractions of all tasks in the group."""

    tasks: int = Field(description="Tasks in the group, failed and missing ones included, errors of ours not.")
    correct: int = Field(description="Tasks whose solution passed.")
    pass_rate: float = Field(description="correct / tasks.")
    faster_than_eager: float = Field(description="Share of tasks correct and strictly >5% faster than eager.")
    faster_than_compile: float = Field(description="Share of tasks correct and strictly >5% faster than compile.")
    geomean_speedup_eager: float | None = Field(description="Geometric mean of eager/solution over correct ones.")
    geomean_speedup_compile: float | None = Field(description="Geometric mean of compile/solution over correct ones.")
    fast_p_eager: dict[str, float] = Field(description="KernelBench fast_p against eager, keyed by p.")
    fast_p_compile: dict[str, float] = Field(description="fast_p against torch.compile, keyed by p.")
    verdicts: dict[str, int] = Field(description="Tasks per verdict; 'missing', 'failed' and 'error' for no verdict.")
    rejections: dict[str, int] = Field(description="Violations of rejected solutions, per rule (check name).")
    custom_kernel_time_fraction: float | None = Field(
        default=None,
        description="Median over correct solutions of the share of their time in their own kernels (None: none "
        "measured); below 1 only where torch computes part of the result (the kernelbench policy).",
    )


class Metrics(_Record):
    """Metrics overall and per group ('L1', 'L2', ..., and 'no level' for tasks without one)."""

    overall: GroupMetrics
    groups: dict[str, GroupMetrics]


class Refusal(_Record):
    """One task that did not pass, as the parity report lists it (evaluation/refusals.py)."""

    ref: str = Field(description="Task reference.")
    verdict: str = Field(description="The verdict, or 'missing'/'failed' where no solution could be judged.")
    rule: str = Field(description="The violated rule (a violation's check), or the verdict where none was broken.")
    reason: str = Field(description="What was found, on one line (cut at 240 characters).")
    differs_from_kernelbench: str = Field(
        default="",
        description="Why KernelBench's own evaluation would not refuse this, where it would not; '' where "
        "it would too (as far as this judge knows).",
    )
    action: str = Field(default="", description="What the author can do about it.")


class BenchReport(_Record):
    """results.json: everything a reader needs to trust and repeat the figures."""

    created_at: str = Field(description="ISO 8601 UTC time the report was written.")
    protocol_version: str = Field(description="The judge's timing protocol version.")
    config: BenchConfig
    environment: dict[str, Any] = Field(description="Host, torch, CUDA, device and the judge's env of a verdict.")
    ceilings: Ceilings | None = Field(default=None, description="Ceilings used for speed-of-light bounds.")
    metrics: Metrics = Field(description="Scored metrics (with a model: best in trajectory).")
    final_metrics: Metrics | None = Field(default=None, description="With a model: metrics of the final workspaces.")
    finished: bool = Field(
        default=True, description="False: rendered from the results.jsonl of a run that stopped before its end."
    )
    tasks: list[TaskResult]
    refusals: list[Refusal] = Field(default_factory=list, description="Every task that did not pass, one line each.")
