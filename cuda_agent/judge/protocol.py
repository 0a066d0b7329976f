"""Messages between the judge and its child processes (JSON, never via stdout): the run's request and result
(the pipeline and the grader, both ours), the calls between the grader and the candidate's process (`CallAnswer` and
the other answers are what the candidate's process says: validated, never trusted), and the baselines'."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from cuda_agent.errors import ProtocolError
from cuda_agent.subproc import first_error
from cuda_agent.types import Language, Violation


class StandbyOrder(BaseModel):
    """The one request a process started ahead (standby.py) gets on stdin: what to run, where, as whom."""

    model_config = ConfigDict(extra="forbid")

    args: list[str] = Field(description="Arguments of the child module's main().")
    cwd: str = Field(description="The folder it runs in.")
    env: dict[str, str] = Field(description="Environment variables it takes on.")
    binds: list[tuple[str, str]] = Field(default_factory=list, description="(source, target) folders bound in.")
    hidden: list[str] = Field(default_factory=list, description="Folders covered by an empty one.")
    shown: list[str] = Field(default_factory=list, description="Paths under those bound back read-only.")
    user: int | None = Field(default=None, description="The uid it drops to; None: it stays as started.")


MAX_GROUP = 256
"""Most calls one request carries (timing.group_size)."""


class RunRequest(BaseModel):
    """What the grader must do with one candidate. Every input is drawn by the grader from seeds it takes from the
    OS's CSPRNG: no seed is in here, nor anywhere the candidate's process can read."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_code: str
    task_name: str
    solution_path: str
    ext_dir: str
    python_path: tuple[str, ...] = Field(
        default_factory=tuple, description="Folders put first on sys.path (a workspace's built module)."
    )
    device: Literal["cuda", "cpu"]
    trials: int = Field(description="Correctness trials, each on fresh inputs.")
    robustness: bool = Field(description="Add sign-flipped and rescaled input trials.")
    time: bool
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
    ci_width: float
    """Past the target, the timed phase goes on until its median's 95 % interval is this narrow (a share)..."""
    max_phase_s: float
    """...or this many seconds are spent (timing.PhaseBudget)."""
    paired_eager: bool = False
    """Time eager again in the grader after the candidate's phase (JudgeConfig.paired_eager)."""
    group_calls: int | None = Field(default=None, ge=1, le=MAX_GROUP)
    """Calls per request, as the task's cached baselines were timed (BaselineResult.group_calls); None: the grader
    chooses them before candidate code (timing.group_size), and the baselines are then timed alike."""
    max_group_calls: int = Field(default=MAX_GROUP, ge=1, le=MAX_GROUP)
    """The most calls per request the grader may choose (JudgeConfig.max_group_calls)."""
    release_per_call: bool = False
    """A request's later calls' inputs released one at a time (child/release.py; JudgeConfig.release_per_call)."""
    screen_min_elems: int
    """Timed outputs this large are screened at sampled positions first (JudgeConfig.screen_min_elems)."""
    candidate_dir: str = Field(description="The candidate's process's own folder (its cwd, HOME and TMPDIR).")
    confine_user: int | None = Field(default=None, description="The uid the candidate's process drops to.")
    confine_binds: tuple[tuple[str, str], ...] = Field(
        default_factory=tuple, description="Folders mounted in the candidate's process's namespace (source, target)."
    )
    confine_hidden: tuple[str, ...] = Field(default_factory=tuple, description="Folders it sees empty (the cache).")
    confine_shown: tuple[str, ...] = Field(default_factory=tuple, description="Paths under those bound back read-only.")
    policy: Literal["cuda-agent", "kernelbench"] = "cuda-agent"
    """'kernelbench': torch compute in forward is allowed, but the candidate's kernels must reach its outputs."""
    language: Language = "cuda"
    """What the solution's kernels are written in (SolutionSource.language): 'triton' sets Triton up in the candidate's
    process and refuses a call of forward that launches no Triton kernel."""


Status = Literal["ok", "compile_error", "runtime_error", "incorrect", "rejected", "task_error", "judge_error"]
"""The candidate's outcomes, then two that are no verdict: the task itself is broken ('task_error'), and our own
code failed in the grader ('judge_error'). The grader writes them; the candidate's process cannot."""


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
    compile_log: str | None = None
    """A compile_error's compiler message: a Triton kernel's, compiled at its first launch (triton_compile.py)."""
    violations: list[Violation] = Field(default_factory=list)
    trials: list[dict[str, Any]] = Field(default_factory=list)
    timing: dict[str, Any] | None = None
    flags: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, Any] = Field(default_factory=dict)
    stage_s: dict[str, float] = Field(default_factory=dict)
    custom_kernel_time_fraction: float | None = Field(
        default=None, description="Share of a profiled forward's time in the candidate's own code (policy/runtime.py)."
    )
    eager_now: dict[str, Any] | None = Field(
        default=None, description="Eager timed again in the grader right after the candidate (paired_eager)."
    )
    kernel_timing: dict[str, Any] | None = Field(
        default=None, description="The candidate's kernel times as the grader took them (kernel_time.bound_claim)."
    )
    group_calls: int = Field(default=1, ge=1, le=MAX_GROUP, description="Calls per request the run made.")


class TensorRef(BaseModel):
    """A tensor in one of the grader's shared buffers (exchange.py)."""

    model_config = ConfigDict(extra="forbid")

    buffer: int = Field(ge=0)
    shape: tuple[int, ...]
    dtype: str


# The grader's questions to the candidate's process (child/grader.py -> child/shim.py, exchange.Channel). The grader
# builds them, so one that does not fit is ours. Each carries a fresh random id (`Grader.ask`) that its answer echoes.
_QUESTION_CONFIG = ConfigDict(extra="forbid", ser_json_inf_nan="constants")
"""An infinite plain input crosses as itself (JSON's Infinity), not as null."""


class BufferHow(BaseModel):
    """How the candidate's process opens a buffer: a CUDA IPC handle (hex), or the descriptor sent beside it."""

    model_config = ConfigDict(extra="forbid")

    ipc: str | None = None
    fd: bool = False


class BufferSpec(BaseModel):
    """One shared buffer the grader allocated (exchange.allocate)."""

    model_config = ConfigDict(extra="forbid")

    id: int = Field(ge=0)
    nbytes: int = Field(ge=0)
    how: BufferHow


class InputRef(BaseModel):
    """One argument of forward: a tensor in a shared buffer, or a plain value."""

    model_config = _QUESTION_CONFIG

    tensor: TensorRef | None = None
    value: bool | int | float | str | None = None


class BuffersQuestion(BaseModel):
    """Map these buffers (their descriptors, on the CPU, come beside the message, in order)."""

    model_config = _QUESTION_CONFIG

    op: Literal["buffers"] = "buffers"
    id: int = Field(default=0, ge=0, description="Fresh for each question; its answer echoes it.")
    buffers: list[BufferSpec]


class LockQuestion(BaseModel):
    """Take the build folder's lock (build.loading_extensions) until the solution is imported."""

    model_config = _QUESTION_CONFIG

    op: Literal["lock"] = "lock"
    id: int = Field(default=0, ge=0, description="Fresh for each question; its answer echoes it.")
    ext_dir: str


class LoadQuestion(BaseModel):
    """Import the solution and build ModelNew with init arguments of its own."""

    model_config = _QUESTION_CONFIG

    op: Literal["load"] = "load"
    id: int = Field(default=0, ge=0, description="Fresh for each question; its answer echoes it.")
    task_code: str
    task_name: str
    solution_path: str
    ext_dir: str
    python_path: list[str]
    language: Language
    candidate_dir: str


class ReferenceQuestion(BaseModel):
    """Build the task's reference (init arguments drawn as a candidate's process draws its own) and call it from now
    on, eager or under torch.compile (`compiled`; its compile runs at the first call). Sent only to a process of ours
    that never loads candidate code: the baselines are timed through it as the candidate is through its own
    (child/baseline.py, calibration.time_reference)."""

    model_config = _QUESTION_CONFIG

    op: Literal["reference"] = "reference"
    id: int = Field(default=0, ge=0, description="Fresh for each question; its answer echoes it.")
    task_code: str
    task_name: str
    compiled: bool = False
    compile_mode: str | None = None


class _BringsBuffers(BaseModel):
    """A question that brings its own input buffers (a call's, on the CPU: grader.Exchange.handover)."""

    buffers: list[BufferSpec] = Field(
        default_factory=list, description="Input buffers new with this question (CPU: descriptors beside it, in order)."
    )
    released: list[int] = Field(default_factory=list, description="Buffers of earlier calls it may let go.")


class DataflowCheck(BaseModel):
    """The kernelbench dataflow check (policy/runtime.torch_only_reason) around one call, within the correctness
    check's tolerances."""

    model_config = _QUESTION_CONFIG

    atol: float
    rtol: float
    norm_rtol: float


class CallSlots(BaseModel):
    """One call of forward within a request: its inputs."""

    model_config = _QUESTION_CONFIG

    inputs: list[InputRef]


class OutputShape(BaseModel):
    """What every call of forward must return at one output position: the reference's shape and dtype."""

    model_config = _QUESTION_CONFIG

    shape: tuple[int, ...]
    dtype: str


class Release(BaseModel):
    """How a request's later calls get their inputs (child/release.py): each written into its buffer (new with the
    request, empty until then) once the call before has returned, the counts in the control block."""

    model_config = _QUESTION_CONFIG

    control: int = Field(ge=0, description="The control block's buffer (sent once, as any buffer).")
    first: int = Field(ge=0, lt=1 << 31, description="The grader's count of released calls before this request.")


class CallQuestion(_BringsBuffers):
    """Calls of forward, one after the other, each on its own input buffers, each call's outputs kept where forward
    left them until the next question (the grader reads them itself: child/outputs.py) (`probe`: of a model returning
    zeros, the grader's measure of its own overhead; `trace`: under the ATen tracer; `dataflow`: under the kernelbench
    dataflow check, on a watched request placed among the timed ones, so that its calls are any request's calls).
    Every request of a run carries the same number of calls (timing.group_size)."""

    model_config = _QUESTION_CONFIG

    op: Literal["call"] = "call"
    id: int = Field(default=0, ge=0, description="Fresh for each question; its answer echoes it.")
    calls: list[CallSlots] = Field(min_length=1, max_length=MAX_GROUP)
    outputs: list[OutputShape] = Field(default_factory=list, description="What each call must return, in order.")
    probe: bool = False
    trace: bool = False
    dataflow: DataflowCheck | None = None
    release: Release | None = None
    """None: every call's inputs are in their buffers before the request."""


class ProfileQuestion(_BringsBuffers):
    """The candidate's share of forward's time and its kernel times."""

    model_config = _QUESTION_CONFIG

    op: Literal["profile"] = "profile"
    id: int = Field(default=0, ge=0, description="Fresh for each question; its answer echoes it.")
    inputs: list[InputRef]


Question = Annotated[
    BuffersQuestion | LockQuestion | LoadQuestion | ReferenceQuestion | CallQuestion | ProfileQuestion,
    Field(discriminator="op"),
]
_QUESTION: TypeAdapter[Question] = TypeAdapter(Question)


def read_question(message: bytes) -> Question:
    """The grader's message (JSON) as the question it is.

    Raises:
        ProtocolError: it is none (the grader is ours: never the candidate's fault).
    """
    try:
        return _QUESTION.validate_json(message)
    except ValidationError as exc:
        raise ProtocolError(f"the grader sent what is no question: {first_error(exc)}") from None


class ReturnedSpec(BaseModel):
    """What forward returned, where it is not what the question said each call must return."""

    model_config = ConfigDict(extra="forbid")

    shape: tuple[int, ...] = Field(default=(), max_length=64)
    dtype: str = Field(default="", max_length=100)
    kind: str = Field(default="tensor", max_length=200, description="'tensor', or the type name of a non-tensor.")


class Done(BaseModel):
    """The candidate's process's answer to a question that asks for nothing back (buffers, lock)."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["ok"] = "ok"


class CudaShare(BaseModel):
    """A CUDA allocation of the answering process, exported for the grader (`cuIpcGetMemHandle` of its base)."""

    model_config = ConfigDict(extra="forbid")

    handle: str = Field(pattern=r"^[0-9a-f]{128}$", description="The 64-byte IPC handle, in hex.")
    nbytes: int = Field(ge=0, description="The allocation's size from its base.")


class OutputPlace(BaseModel):
    """Where one output of one call lies (its shape and dtype are the question's): its first element's address in
    the answering process (CPU), or its offset in bytes from the base of an exported allocation (CUDA: the answer's
    `shared[allocation]`), and its strides in elements. A claim: the grader reads only what these say, within a
    bound on the span the strides cover (child/outputs.py)."""

    model_config = ConfigDict(extra="forbid")

    address: int = Field(ge=0, lt=1 << 64)
    strides: tuple[Annotated[int, Field(ge=0, lt=1 << 62)], ...] = Field(max_length=64)
    allocation: int | None = Field(default=None, ge=0, lt=MAX_GROUP * 64)


FlagValue = Annotated[bool | int | float | Annotated[str, Field(max_length=200)] | None, "a precision flag's value"]


class CallAnswer(BaseModel):
    """The candidate's process's account of a request's calls of forward: read as a claim, checked by the grader."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["ok", "raised", "compile_error", "mismatch"]
    """'compile_error': forward raised while a Triton kernel compiled at its launch (triton_compile.py)."""
    ms: list[Annotated[float, Field(ge=0, allow_inf_nan=False)]] = Field(
        default_factory=list, max_length=MAX_GROUP, description="Its own timing of each call, in order."
    )
    message: str = Field(default="", max_length=20_000)
    out_of_memory: bool = False
    returned: list[ReturnedSpec] = Field(default_factory=list, max_length=1000)
    torch_ops: dict[str, int] = Field(default_factory=dict, description="ATen compute operators seen while traced.")
    changed_flags: dict[Annotated[str, Field(max_length=200)], list[FlagValue]] = Field(
        default_factory=dict, max_length=100, description="Each precision flag changed: [as it was, as it is now]."
    )
    l2_limit_bytes: int = 0
    launches: int | None = Field(
        default=None, ge=0, description="The fewest Triton kernel launches of any of its calls (None: not Triton)."
    )
    torch_only_reason: str | None = Field(
        default=None, max_length=2000, description="Under `dataflow`: why its kernels reach no output (None: they do)."
    )
    outputs: list[list[OutputPlace]] = Field(
        default_factory=list,
        max_length=MAX_GROUP,
        description="Per call, per output: where forward's result lies in the process that answered, kept there "
        "until the next question (the grader reads it with that process stopped: child/outputs.py).",
    )
    shared: list[CudaShare] = Field(
        default_factory=list, max_length=MAX_GROUP * 64, description="CUDA: the allocations the outputs lie in."
    )


class ImportFacts(BaseModel):
    """What the candidate's process says of its import (how Triton was set up for it): claims the grader records in
    the verdict's env, typed so that nothing of another shape or depth reaches the verdict (a list nested past the JSON writer's depth would stop the
    grader writing its result: our failure instead of the candidate's verdict)."""

    model_config = ConfigDict(extra="forbid")

    triton: str | None = Field(default=None, max_length=100, description="Triton's version, for a Triton solution.")
    triton_interpret: bool | None = None
    triton_cache_dir: str | None = Field(default=None, max_length=4096)


class LoadAnswer(BaseModel):
    """How importing the solution and building ModelNew went, in the candidate's process."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["ok", "compile_error", "runtime_error", "rejected"]
    stage: Literal["import", "init"] = "import"
    message: str = Field(default="", max_length=20_000)
    check: str = Field(default="", max_length=100)
    out_of_memory: bool = False
    env: ImportFacts = Field(default_factory=lambda: ImportFacts())


class ProfileAnswer(BaseModel):
    """The candidate's own share of forward's time and its kernel times."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["ok", "raised"]
    message: str = Field(default="", max_length=20_000)
    fraction: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False)
    fraction_error: str = Field(default="", max_length=2000)
    kernel_ms: list[Annotated[float, Field(ge=0, allow_inf_nan=False)]] | None = Field(
        default=None,
        max_length=1000,
        description="Each profiled call's summed kernel durations (child/kernel_time.py).",
    )
    out_of_memory: bool = False


class BaselineRequest(BaseModel):
    """What the baseline process must time (no candidate code is loaded there): the reference, through a shim process
    of ours, by the candidate's protocol (child/baseline.py)."""

    model_config = ConfigDict(extra="forbid")

    task_code: str
    task_name: str
    device: Literal["cuda", "cpu"]
    compile_mode: str | None
    warmup_reps: int
    min_reps: int
    max_reps: int
    target_phase_s: float
    ci_width: float = 0.01
    max_phase_s: float = 2.0
    """As RunRequest's: each phase goes on past its target for a narrow interval of its median."""
    timing_lock: str | None = None
    """Path of a file held with flock around each timed phase (parallel baseline runs share a GPU)."""
    gpu_turns: str | None = None
    """Folder of the GPU's turns (gpu_turns.py): the process takes a shared turn to set up and build, an exclusive
    one to time. None: the caller holds the process's turn."""
    group_calls: int | None = Field(default=None, ge=1, le=MAX_GROUP)
    """Calls per request, as the candidate's run made them (RunResult.group_calls): a time is a request's over its
    calls. None: no run chose them (reference timings alone); the process chooses them as the grader does
    (calibration.calibrate)."""
    max_group_calls: int = Field(default=MAX_GROUP, ge=1, le=MAX_GROUP)
    """As RunRequest's."""
    release_per_call: bool = False
    """As RunRequest's: the baselines' requests are released as the candidate's are."""


class BaselineResult(BaseModel):
    """Eager and torch.compile timings of a reference."""

    model_config = ConfigDict(extra="forbid")

    eager: dict[str, Any] | None = None
    compile: dict[str, Any] | None = None
    compile_error: str | None = None
    error: str | None = None
    group_calls: int = Field(default=1, ge=1, le=MAX_GROUP, description="Calls per timed group (BaselineRequest).")
    gpu_held_s: float | None = None
    """Seconds it held its exclusive turn (with `gpu_turns`), and waited for its turns."""
    gpu_wait_s: float | None = None
    flags: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, Any] = Field(default_factory=dict)
