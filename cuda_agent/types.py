"""Records that cross stage and process boundaries.

Every record here is a pydantic model that round-trips through JSON, so it can be written to
disk, sent between processes and read back by a later stage without loss.
"""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Language = Literal["cuda", "triton"]
"""What a solution's kernels are written in: 'cuda' (C++/CUDA built with load_inline or a workspace's kernels/, the
CPU's C++ variant included) or 'triton' (`@triton.jit` functions launched from forward)."""
LANGUAGES: tuple[Language, ...] = ("cuda", "triton")


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


class KernelTimings(_Record):
    """Summed device-kernel durations inside one forward, medians over profiled calls, in ms (the paper's basis:
    judge/child/kernel_time.py); None where not measured (the CPU has no kernel events)."""

    solution: float | None = Field(default=None, description="The candidate's kernel time per call (ms).")
    eager: float | None = Field(default=None, description="Eager's kernel time per call (ms).")
    compile: float | None = Field(default=None, description="torch.compile's kernel time per call (ms).")
    solution_ci: tuple[float, float] | None = Field(default=None, description="Its interval, as Timings'.")
    eager_ci: tuple[float, float] | None = Field(default=None, description="Its interval, as Timings'.")
    compile_ci: tuple[float, float] | None = Field(default=None, description="Its interval, as Timings'.")


class Timings(_Record):
    """Median times of the timed phases, in milliseconds; None where not measured."""

    solution: float | None = Field(default=None, description="Candidate median time per call (ms).")
    eager: float | None = Field(
        default=None,
        description="Reference eager median time per call (ms); where eager was timed again beside the candidate "
        "(JudgeConfig.paired_eager), the cached time rescaled by the machine's drift (env.timing.drift).",
    )
    compile: float | None = Field(default=None, description="Reference torch.compile median time per call (ms), alike.")
    solution_ci: tuple[float, float] | None = Field(
        default=None,
        description="The interval (ms) the reward decided on: the median's 95 % confidence interval, widened to the "
        "device's noise floor (JudgeConfig.timing_noise_floor); None where not measured.",
    )
    eager_ci: tuple[float, float] | None = Field(default=None, description="As solution_ci, for eager.")
    compile_ci: tuple[float, float] | None = Field(default=None, description="As solution_ci, for torch.compile.")
    kernel: KernelTimings | None = Field(default=None, description="Kernel times beside the whole-call times.")
    basis: Literal["call", "kernel"] = Field(
        default="call",
        description="What the reward and speedups were decided on: whole calls, or kernel times where eager's whole "
        "call is mostly overhead (judge/basis.py).",
    )


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
    policy: str = Field(default="cuda-agent", description="The rule set judged under: 'cuda-agent' or 'kernelbench'.")
    language: Language = Field(
        default="cuda", description="What the solution's kernels are written in (the judge's call)."
    )
    custom_kernel_time_fraction: float | None = Field(
        default=None,
        description="Share of forward's GPU (CPU) time spent in the candidate's own code rather than torch's "
        "operators, from a profiled call; None when the candidate did not get that far.",
    )


class ToolCall(_Record):
    """One tool call as the model emitted it; `arguments` is kept as raw text, even when malformed."""

    id: str = Field(description="Call id that the tool message answers, e.g. 'call_0'.")
    name: str = Field(description="Tool name the model asked for (may be unknown to the tool set).")
    arguments: str = Field(default="{}", description="Arguments as JSON text, exactly as the model produced them.")
    error: str | None = Field(
        default=None, description="Why the backend could not parse this call from the model's text, if it could not."
    )


class ToolResult(_Record):
    """What one tool call returned to the model."""

    tool_call_id: str = Field(description="Id of the ToolCall this answers.")
    name: str = Field(description="Tool name of the call.")
    output: str = Field(description="Text sent back to the model (already capped).")
    is_error: bool = Field(default=False, description="The call failed (bad arguments, refused, non-zero exit, ...).")
    truncated: bool = Field(default=False, description="Output was cut to fit the cap.")
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Tool facts for readers, e.g. 'path', 'diff', 'exit_code', 'timed_out'."
    )
    duration_s: float = Field(default=0.0, description="Wall time of the tool call, in seconds.")

    def to_message(self) -> dict[str, Any]:
        """The OpenAI-style `tool` message that answers the call."""
        return {"role": "tool", "tool_call_id": self.tool_call_id, "content": self.output}


class Turn(_Record):
    """One assistant turn of an episode: the model's message, the tool calls it made and their results."""

    index: int = Field(description="0-based turn number.")
    content: str = Field(default="", description="Assistant text (reasoning and prose) of this turn.")
    tool_calls: list[ToolCall] = Field(default_factory=list, description="Tool calls of this turn, in order.")
    tool_results: list[ToolResult] = Field(default_factory=list, description="One result per tool call, in order.")
    extra_messages: list[dict[str, Any]] = Field(
        default_factory=list, description="Messages the loop appended after the tool results (e.g. a format nudge)."
    )
    finish_reason: str | None = Field(
        default=None, description="Backend finish reason: 'stop', 'tool_calls', 'length'."
    )
    prompt_tokens: int | None = Field(default=None, description="Context tokens the backend counted for this call.")
    completion_tokens: int | None = Field(default=None, description="Tokens the model generated in this turn.")
    token_ids: list[int] | None = Field(default=None, description="Generated token ids, where the backend gives them.")
    logprobs: list[float] | None = Field(default=None, description="Log-probability of each generated token.")
    model_s: float = Field(default=0.0, description="Wall time waiting for the model, in seconds.")
    tools_s: float = Field(default=0.0, description="Wall time running this turn's tools, in seconds.")
    verdicts: list[Verdict] = Field(default_factory=list, description="Judgements made during this turn, if any.")

    def messages(self) -> list[dict[str, Any]]:
        """The OpenAI-style messages this turn added to the conversation, in order."""
        assistant: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            assistant["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        return [assistant, *(r.to_message() for r in self.tool_results), *self.extra_messages]


class EpisodeEnd(StrEnum):
    """What ended an episode (agent/loop.py)."""

    FINISHED = "finished"
    """The model replied without a tool call: it is done (terminated)."""
    TURN_LIMIT = "turn_limit"
    """The turn limit was reached (150 in training, 200 in evaluation) (truncated)."""
    TOKEN_BUDGET = "token_budget"
    """The context would not hold the model's next reply (truncated)."""
    CONTEXT_LENGTH = "context_length"
    """The backend refused the context as too long (ContextLengthError) (truncated)."""


class Trajectory(_Record):
    """One agent episode: the prompt, every turn, and how it ended. Stored as JSONL (agent/trajectory.py)."""

    task: str = Field(description="Reference of the task, e.g. 'examples/relu'.")
    model: str = Field(description="Model spec or name that produced the turns.")
    prompt: list[dict[str, Any]] = Field(description="The messages before the first turn (system and user).")
    tools: list[dict[str, Any]] = Field(default_factory=list, description="Tool schemas offered to the model.")
    started_at: str = Field(default="", description="ISO 8601 UTC time the episode started.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Config, workspace path, seeds, versions.")
    turns: list[Turn] = Field(default_factory=list, description="The assistant turns, in order.")
    verdict: Verdict | None = Field(default=None, description="The episode's verdict, if judged.")
    reward: float | None = Field(default=None, description="Episode reward (the judge's), if scored.")
    judge_error: str | None = Field(
        default=None, description="Why there is no verdict: a failure of ours while judging, never the candidate's."
    )
    exit_status: EpisodeEnd | None = Field(
        default=None, description="What ended the episode (EpisodeEnd, e.g. 'finished'); None if it never ended."
    )
    terminated: bool = Field(default=False, description="The episode reached a natural end (the model finished).")
    truncated: bool = Field(default=False, description="The episode was cut by a turn, token or time limit.")
    complete: bool = Field(default=False, description="The final line was written (False after a crash).")

    def messages(self) -> list[dict[str, Any]]:
        """The whole conversation as OpenAI-style messages."""
        return [*self.prompt, *(m for turn in self.turns for m in turn.messages())]
