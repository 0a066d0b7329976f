"""The run stage's grader: the trusted half of a judgement, in a process the candidate's code cannot reach.

Run as `python -m cuda_agent.judge.child.grader REQUEST.json RESULT.json` by the pipeline (started ahead as a
standby, standby.py), as the judge's own user. It starts the candidate's process (shim.py) as soon as it starts
itself, and on its request hands that process its confinement (mount namespace, unprivileged user). Then:
1. the reference is built here from init arguments drawn here, and run once (before any candidate code) on inputs of
   its own, which also gives the shape and dtype of every output the candidate must return;
2. the grader measures its own overhead per request (`calibration.calibrate`: requests of a model that returns
   zeros) and chooses how many calls each request carries (one, or more where a call is short against that overhead's
   noise: timing.group_size), then has the candidate's process import the solution and build ModelNew with init
   arguments of its own;
3. every call draws fresh inputs from a seed taken from the OS's CSPRNG (63 bits), in this process; the candidate's
   process sees the inputs' values in the shared buffers and nothing else; its outputs stay where forward left
   them, and the grader reads them itself with every process of the candidate's stopped (outputs.py), then compares
   them with the reference on the grader's own copy of the inputs (input mutation shows against the buffers it was
   handed);
4. the timed phase: the grader flushes the cache, hands over the request and times it from outside (request to
   answer, until every process of the candidate's is stopped); the sum of the times the candidate's process reports
   for its calls is taken unless it is below what was seen from outside (timing.external_bound); a random share of
   outputs, decided after each request, is judged like a trial's;
5. one more correctness trial, the share of time in the candidate's own kernels, and the result, written here.

A request (of as many calls as every other) is a trial, a timed request, or one whose outputs will be judged: the
candidate's process cannot tell which, except that trials run under the ATen tracer (policy: torch compute in forward),
which it can see, as it can see the instruments on the requests they watch (child/watched_calls.py).
Nothing the candidate's process writes is read as a result; a crash or an exit before it answers is its
`runtime_error`. What this does not protect against: see the judge's DESIGN.md.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from cuda_agent.errors import ProtocolError, TaskError
from cuda_agent.judge.child import watched_calls
from cuda_agent.judge.child.buffers import Exchange
from cuda_agent.judge.child.calibration import calibrate, time_reference
from cuda_agent.judge.child.exchange import Channel, ChannelClosed, dtype_name, dtype_of
from cuda_agent.judge.child.kernel_time import bound_claim
from cuda_agent.judge.child.outputs import Outputs
from cuda_agent.judge.child.release import Releases
from cuda_agent.judge.child.stop import CANDIDATE_STATUSES, Stop, out_of_memory, stop
from cuda_agent.judge.protocol import (
    CallAnswer,
    CallQuestion,
    CallSlots,
    Done,
    InputRef,
    LoadAnswer,
    LoadQuestion,
    LockQuestion,
    OutputShape,
    ProfileAnswer,
    ProfileQuestion,
    Question,
    RunRequest,
    RunResult,
)
from cuda_agent.judge.standby import (
    SHIM_NAMESPACE_ENV,
    TURNS_ENV,
    Standby,
    await_request,
    mark_candidate,
    progress,
    set_up_turn,
)
from cuda_agent.judge.uids import adopt_orphans, kill_below
from cuda_agent.subproc import account, child_env, first_error, read_record
from cuda_agent.types import Violation

if TYPE_CHECKING:
    from cuda_agent.judge.child.gauge import Gauge
    from cuda_agent.judge.child.outputs import Released, Signaller

SHIM_STARTUP_S = 300.0


def fresh_seed() -> int:
    """A seed nobody can predict: 63 bits from the OS's CSPRNG, drawn for one call alone."""
    return secrets.randbits(63)


class Grader:
    """State of one run stage; methods are the steps, in order."""

    def __init__(self, request: RunRequest, shim: Standby, channel: Channel) -> None:
        import torch

        from cuda_agent.judge import env
        from cuda_agent.judge.child import guards

        self.req = request
        self.torch = torch
        self.shim, self.channel = shim, channel
        self.tick = progress()
        """Tells the pipeline that a step finished (standby.py): its time limits are per step."""
        self.device = request.device
        self.flags = env.apply_precision_flags()
        self.trials: list[dict[str, Any]] = []
        self.stage_s: dict[str, float] = {}
        self.env = env.describe_device(self.device)
        self.l2 = guards.PersistingL2() if self.device == "cuda" else None
        self.env["l2_persistence_guard"] = bool(self.l2 and self.l2.available)
        self.exchange = Exchange(self)
        self.output_specs: list[tuple[tuple[int, ...], Any]] = []
        self.overhead_ms: list[float] = []  # per request of `group` calls (`calibrate`)
        self.group = 1
        """Calls per request (`calibrate`): every request of the run carries this many."""
        self.shim_l2_bytes = 0
        """The persisting-L2 set-aside the candidate's process held before candidate code (some machines set one)."""
        self.candidate_started = False
        self.copies = Outputs(torch, self.device)
        self.outputs: list[list[Any]] = []
        """Our copies of the last request's outputs, per call (`Outputs.read`)."""
        self.sample: list[Any] = []
        """CUDA: the last request's outputs in the candidate's memory, read at random positions after our copy
        (`trial.sample_outputs`): a kernel left running shows when they are read again."""
        self.trusted = False
        """Whether the process answering is ours (gauge.Ours): stopped alone to read its outputs."""
        self.signaller: Signaller | None = None
        """Stops a confined candidate's processes (outputs.Signaller), from the first request on."""
        self.watch_at = -1
        """The first watched request's place (child/watched_calls.py); the dataflow check's finding, refused later:"""
        self.torch_only_reason: str | None = None
        self.gauge: Gauge | None = None
        """The load's drift as the timed phase runs (child/gauge.py); None: not timed, or the gauge itself."""
        self.ours_pids: list[int] = []
        """Process ids of our own shim processes beside the candidate's (the gauge's, eager now's): never stopped
        with the candidate's (`gauge.held_still`)."""
        self.kernel_claim: list[float] | None = None
        """The kernel times the candidate's process reported from its profiler (`custom_work`), bounded in `run`."""
        self.releases = Releases()
        """A request's later calls' inputs, held until each is released (release.py; `RunRequest.release_per_call`)."""

    def sync(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    # --- the candidate's process ---
    def ask(self, message: Question, sent: list[int] | None = None, stage: str = "") -> dict[str, Any]:
        """Send a message (and the descriptors `sent`, closed here) to the candidate's process and return its answer
        (unvalidated). Each message carries a fresh random id that its answer must echo: an answer sent ahead of the
        question cannot be one."""
        return self.answer(self.send(message, sent, stage), message.op, stage)

    def send(self, message: Question, sent: list[int] | None = None, stage: str = "") -> int:
        """The first half of `ask`: send the message with a fresh id (returned)."""
        ident = message.id = fresh_seed()
        try:
            self.channel.send(message, sent or None)
        except ChannelClosed as exc:
            raise self.died(stage or message.op, exc) from None
        finally:
            for fd in sent or []:
                os.close(fd)
        return ident

    def answer(self, ident: int, op: str, stage: str = "") -> dict[str, Any]:
        """The second half of `ask`: the answer to the question of id `ident` (unvalidated)."""
        try:
            answer, fds = self.channel.receive()
        except ChannelClosed as exc:
            raise self.died(stage or op, exc) from None
        for extra in fds:  # the candidate's process sends none; one it sent is closed, never used
            os.close(extra)
        if answer.pop("id", None) != ident:
            if not self.candidate_started:
                raise RuntimeError(f"the candidate's process answered {op!r} out of turn")
            raise stop("runtime_error", stage or op, "the candidate's process answered out of turn")
        return answer

    def died(self, stage: str, cause: Exception) -> Exception:
        """The candidate's process is gone (or spoke nonsense): its runtime_error once its code ran, else ours."""
        try:
            code = self.shim.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:  # still alive: it closed its socket or broke the protocol
            code = None
        tail = " ".join(self.shim.stderr_tail(4000).strip().splitlines()[-6:])
        how = f"died (exit {code})" if code is not None else f"broke off ({cause})"
        if not self.candidate_started:
            return RuntimeError(f"the candidate's process {how} before candidate code ran: {tail or 'no output'}")
        return stop("runtime_error", stage, f"the candidate's process {how} during {stage}: {tail or 'no output'}")

    def answer_of(self, kind: type, message: dict[str, Any], stage: str) -> Any:
        """The candidate's process's answer as the record `kind`; one that is none is its runtime_error once its code
        ran, else ours (ProtocolError)."""
        try:
            return kind.model_validate(message)
        except ValidationError as exc:
            if not self.candidate_started:
                raise ProtocolError(f"the candidate's process answered {stage} with no {kind.__name__} before candidate "
                                    f"code ran: {first_error(exc)}") from None  # fmt: skip
            text = f"the candidate's process answered what no honest one does ({exc.error_count()} errors)"
            raise stop("runtime_error", stage, text) from None

    def start_candidate_process(self) -> None:
        """Hand the candidate's process (started ahead) its folder, environment and confinement."""
        from cuda_agent.judge.child.shim import DEVICE_ENV
        from cuda_agent.subproc import Confinement

        why_not = self.shim.wait_ready(SHIM_STARTUP_S)
        if why_not:
            raise RuntimeError(f"{why_not} (the candidate's process)")
        req = self.req
        user = account(req.confine_user) if req.confine_user is not None else None
        confine = None
        if user or req.confine_binds:
            confine = Confinement(
                user=user, binds=req.confine_binds, hidden=req.confine_hidden, shown=req.confine_shown
            )
        folder = req.candidate_dir
        env = {"TORCH_EXTENSIONS_DIR": req.ext_dir, "HOME": folder, "TMPDIR": folder, DEVICE_ENV: self.device}
        self.shim.go([], Path(folder), env, confine)

    def close_reading(self) -> None:
        """Close what reading the outputs held: the candidate's allocations opened here, the signaller."""
        self.copies.close()
        self.releases.close()
        if self.signaller is not None:
            self.signaller.close()
            self.signaller = None

    # --- set-up, before candidate code ---
    def load_reference(self) -> None:
        from cuda_agent.tasks.problem import call_inputs, load_problem

        name = f"{self.req.task_name} (reference)"
        self.problem = load_problem(self.req.task_code, name, module_name="_cuda_agent_reference", register=False)
        self.torch.manual_seed(0)
        self.init_args = call_inputs(self.problem, name, "get_init_inputs")
        self.torch.manual_seed(0)
        self.reference = self.problem.Model(*self.init_args).to(self.device)
        self.reference64: Any = None
        self.reduction_length = 1
        """The float64 reference's longest reduction (trial._reference64; the strict precision bound grows with it)."""
        self.warm_reference()

    def warm_reference(self) -> None:
        """Run the reference once on inputs of its own: a reference that cannot run fails here, as the task's, and its
        outputs say what every call of the candidate must return."""
        from cuda_agent.judge.child.inputs import make_inputs
        from cuda_agent.tasks.inspection import flatten_outputs

        inputs = make_inputs(self.problem, self.req.task_name, fresh_seed(), self.device)
        try:
            with self.torch.no_grad():
                outputs = flatten_outputs(self.reference(*inputs))
            self.sync()
        except Exception as exc:
            if out_of_memory(exc):
                raise
            raise TaskError(
                f"{self.req.task_name}: the reference's forward raised {type(exc).__name__}: {exc}"
            ) from None
        for value in outputs:
            dtype_of(self.torch, dtype_name(value.dtype))  # a dtype that cannot cross is the task's problem
        self.output_specs = [(tuple(v.shape), v.dtype) for v in outputs]

    def import_candidate(self) -> None:
        start = time.perf_counter()
        # The build folder's lock first (build.loading_extensions): another judgement's process loading the same
        # build holds it, and that wait is ours, before the candidate's code runs.
        self.answer_of(Done, self.ask(LockQuestion(ext_dir=self.req.ext_dir), stage="import"), "import")
        self.candidate_started = True
        mark_candidate()
        req = self.req
        message = LoadQuestion(
            task_code=req.task_code,
            task_name=req.task_name,
            solution_path=req.solution_path,
            ext_dir=req.ext_dir,
            python_path=list(req.python_path),
            language=req.language,
            candidate_dir=req.candidate_dir,
        )
        answer: LoadAnswer = self.answer_of(LoadAnswer, self.ask(message, stage="import"), "import")
        if answer.status != "ok":
            violations = [Violation(check=answer.check, message=answer.message)] if answer.check else []
            raise Stop(
                RunResult(
                    status=answer.status,
                    stage=answer.stage,
                    message=answer.message,
                    compile_log=answer.message if answer.status == "compile_error" else None,
                    violations=violations,
                    out_of_memory=answer.out_of_memory,
                )
            )
        # What the candidate's process set Triton up with, before the candidate's code ran (a claim, recorded only).
        self.env.update(answer.env.model_dump(exclude_none=True))
        self.stage_s["import"] = time.perf_counter() - start

    # --- calls ---
    def load_calls(self, calls: list[list[Any]]) -> tuple[list[list[InputRef]], list[list[Any]]]:
        """Each call's inputs in buffers of its own (`Exchange.load`), per call. Where calls are released one at a
        time (release.py), only the first call's are written now, the others held until the call before returns."""
        release = self.req.release_per_call and len(calls) > 1
        loaded = [self.exchange.load(inputs, f"in{k}_", fill=not (release and k)) for k, inputs in enumerate(calls)]
        self.releases.hold(self.torch, [views for _, views in loaded], calls if release else [])
        return [refs for refs, _ in loaded], [views for _, views in loaded]

    def call(
        self,
        refs: list[list[InputRef]],
        stage: str,
        probe: bool = False,
        trace: bool = False,
        dataflow: bool = False,
    ) -> tuple[CallAnswer, float]:
        """One request: forward on each call's inputs (`refs`, one list per call), under the tracer or the dataflow
        check; its answer, checked, and our measure of it (ms from request to answer, every process of the
        candidate's stopped: `collect`)."""
        calls = [CallSlots(inputs=inputs) for inputs in refs]
        shapes = [OutputShape(shape=shape, dtype=dtype_name(dtype)) for shape, dtype in self.output_specs]
        check = watched_calls.dataflow_check(self.req) if dataflow else None
        release = self.releases.question(self, shapes)
        message = CallQuestion(calls=calls, outputs=shapes, probe=probe, trace=trace, dataflow=check, release=release)
        fds = self.exchange.handover(message)
        self.sync()
        start = time.perf_counter()
        ident = self.send(message, fds, stage)
        marked = self.releases.run(self, release, shapes, stage) if release is not None else []
        answer: CallAnswer = self.answer_of(CallAnswer, self.answer(ident, message.op, stage), stage)
        external_ms = (time.perf_counter() - start) * 1e3
        self.outputs, self.sample = [], []
        if answer.status == "ok" and len(answer.ms) != len(calls):
            if not self.candidate_started:
                raise ProtocolError(f"the candidate's process timed {len(answer.ms)} of {len(calls)} calls")
            message_text = f"the candidate's process answered {len(answer.ms)} times for {len(calls)} calls"
            raise stop("runtime_error", stage, message_text)
        if answer.status == "ok" and release is not None and len(marked) < len(calls) - 1:
            message_text = "the candidate's process answered before its request's calls had all been released"
            if not self.candidate_started:
                raise ProtocolError(message_text)
            raise stop("runtime_error", stage, message_text)
        if answer.status == "ok":
            external_ms = self.collect(answer, shapes, stage, start, marked)
        self.tick()
        if probe:
            self.shim_l2_bytes = max(self.shim_l2_bytes, answer.l2_limit_bytes)
        self.check_answer(answer, stage)
        if dataflow:
            self.torch_only_reason = self.torch_only_reason or answer.torch_only_reason
        return answer, external_ms

    def collect(
        self, answer: CallAnswer, shapes: list[OutputShape], stage: str, start: float, marked: list[Released]
    ) -> float:
        """Stop every process of the candidate's, read its outputs into ours (outputs.py), let them go on; the outside
        view in ms: until all are stopped (CPU: nothing of the candidate's runs after that), on CUDA until our copy
        is done (a kernel it launched before the stop may still run, and what we copied ran before that)."""
        from cuda_agent.judge.child.outputs import stopped
        from cuda_agent.judge.child.trial import SAMPLED_CALLS, sample_outputs

        with stopped(self, self.channel.sender, stage):
            external_ms = (time.perf_counter() - start) * 1e3
            self.outputs = self.copies.read(self, answer, shapes, stage, marked)
            if self.device == "cuda":
                external_ms = (time.perf_counter() - start) * 1e3
                remote = self.copies.remote
                read = secrets.SystemRandom().sample(remote, min(SAMPLED_CALLS * len(shapes), len(remote)))
                self.sample = sample_outputs(self, read, fresh_seed())
        return external_ms

    def check_answer(self, answer: CallAnswer, stage: str) -> None:
        """What the candidate's process reported that ends the run: its exception, outputs of the wrong kind, torch
        compute seen by the tracer, flags or the persisting-L2 set-aside changed in its process."""
        if answer.status == "raised":
            raise stop("runtime_error", stage, answer.message, oom=answer.out_of_memory)
        if answer.status == "compile_error":  # a Triton kernel's compile at its first launch
            message = f"compilation failed: a Triton kernel at its first launch ({stage})"
            raise Stop(RunResult(status="compile_error", stage=stage, message=message, compile_log=answer.message))
        if answer.status == "mismatch":
            raise self.mismatch(answer, stage)
        if answer.torch_ops and self.req.policy == "cuda-agent":  # kernelbench: torch may compute
            ops = ", ".join(f"{k} x{v}" for k, v in sorted(answer.torch_ops.items()))
            message = f"torch computed part of the output: {ops}"
            check = Violation(check="torch_compute_at_runtime", message=f"ATen compute ops ran in forward: {ops}")
            raise stop("rejected", stage, message, [check])
        if answer.launches == 0 and self.req.language == "triton" and stage != "calibration":
            message = "forward launched no Triton kernel, so none of your kernels ran"
            raise stop("rejected", stage, message, [Violation(check="forward_calls_no_kernel", message=message)])
        if answer.changed_flags:
            message = f"changed global flags {answer.changed_flags}"
            raise stop("rejected", stage, message, [Violation(check="global_state_changed", message=message)])
        if answer.l2_limit_bytes > self.shim_l2_bytes:
            message = (
                f"the persisting-L2 set-aside was raised from {self.shim_l2_bytes} to {answer.l2_limit_bytes} bytes"
            )
            raise stop("rejected", stage, message, [Violation(check="l2_persistence", message=message)])

    def mismatch(self, answer: CallAnswer, stage: str) -> Stop:
        if answer.returned and answer.returned[0].kind != "tensor":
            kind = answer.returned[0].kind
            message = f"forward returned a {kind}: return a tensor, or a list or tuple of plain tensors"
            return stop("rejected", stage, message, [Violation(check="non_tensor_output", message=message)])
        got = [f"{list(r.shape)} {r.dtype}" for r in answer.returned]
        want = [f"{list(shape)} {dtype_name(dtype)}" for shape, dtype in self.output_specs]
        message = f"forward returned {len(got)} outputs {got}, the reference returns {len(want)} {want}"
        trial = {"label": stage, "ok": False, "reason": message}
        self.trials.append(trial)
        return stop("incorrect", stage, message)

    def run_trials(self, specs: list[tuple[str, str]], dataflow: bool = False, flush: bool = False) -> None:
        """A request carrying the trials `specs` ((transform, label) each) among its calls (an identity one's drawn
        after the answer), each judged in full, other outputs by timing.GROUP_CHECKS; under the tracer or (`dataflow`)
        the dataflow check, their profilers not nesting; `flush`: the cache flushed after loading, as when timed."""
        from cuda_agent.judge.child.inputs import make_inputs
        from cuda_agent.judge.child.timing import GROUP_CHECKS
        from cuda_agent.judge.child.trial import judge_trial, screen_trial

        draw, transforms = secrets.SystemRandom(), ["identity"] * self.group
        moved = [transform for transform, _ in specs if transform != "identity"]
        moved_at = draw.sample(range(self.group), len(moved))
        for k, transform in zip(moved_at, moved, strict=True):
            transforms[k] = transform
        seeds = [fresh_seed() for _ in transforms]
        drawn = [
            make_inputs(self.problem, self.req.task_name, seeds[k], self.device, t) for k, t in enumerate(transforms)
        ]
        refs, given = self.load_calls(drawn)
        if flush:
            self.flush()
        self.call(refs, specs[0][1], trace=not dataflow, dataflow=dataflow)
        plain = iter(draw.sample([k for k, t in enumerate(transforms) if t == "identity"], len(specs) - len(moved)))
        at = iter(moved_at)
        judged = [next(plain) if transform == "identity" else next(at) for transform, _ in specs]
        for k in range(self.group):  # first: the trials' records stay the last (a recheck's the verdict's last)
            if k not in judged and transforms[k] == "identity" and draw.randrange(self.group) < GROUP_CHECKS:
                args = (self, drawn[k], given[k], self.outputs[k], seeds[k])
                trial = screen_trial(*args, fresh_seed()) or judge_trial(*args, "identity", "timed", precision=False)
                self.record_trial(trial, specs[0][1], "an output beside a trial's is wrong: ")
        for k, (transform, label) in zip(judged, specs, strict=True):  # in order: the first to fail is as before
            trial = judge_trial(self, drawn[k], given[k], self.outputs[k], seeds[k], transform, label)
            self.record_trial(trial, label)

    def record_trial(self, trial: dict[str, Any], stage: str, context: str = "") -> None:
        """Keep a judged trial; a failed one ends the run (`context` goes before its reason)."""
        self.trials.append(trial)
        if not trial["ok"]:
            check = "reduced_precision" if trial.get("precision") else trial.get("violation")
            violations = [Violation(check=check, message=trial["reason"])] if check else []
            raise stop("rejected" if check else "incorrect", stage, context + trial["reason"], violations) from None

    def correctness(self) -> None:
        start = time.perf_counter()
        self.watch_at = watched_calls.place(self.req, self.group)
        specs = [("identity", "trial")] * self.req.trials
        if self.req.robustness:
            specs += [("negate", "robustness"), ("stretch", "robustness")]
        for request, first in enumerate(range(0, len(specs), self.group)):
            watched = self.req.policy == "kernelbench" and request == self.watch_at  # one trial request's place
            self.run_trials(specs[first : first + self.group], dataflow=watched)
        self.stage_s["correctness"] = time.perf_counter() - start

    def timing(self) -> dict[str, Any]:
        from cuda_agent.judge.child.timed_calls import TimedCalls

        start = time.perf_counter()
        calls = TimedCalls(self)
        summary = calls.run_phase()
        self.stage_s["timing"] = time.perf_counter() - start - calls.judged_s
        self.stage_s["timed_outputs"] = calls.judged_s
        self.run_trials([("identity", "recheck")])
        return summary

    def custom_work(self) -> float | None:
        """One more call, profiled in the candidate's process: the share of forward's time in its own code (a
        report); under kernelbench, then, the refusal of kernels that reach no output (child/watched_calls.py)."""
        from cuda_agent.judge.child.inputs import make_inputs

        start = time.perf_counter()
        inputs = make_inputs(self.problem, self.req.task_name, fresh_seed(), self.device)
        question = ProfileQuestion(inputs=self.exchange.load(inputs)[0])
        del inputs
        fds = self.exchange.handover(question)
        answer: ProfileAnswer = self.answer_of(ProfileAnswer, self.ask(question, fds, "custom_work"), "custom_work")
        self.tick()
        if answer.status == "raised":
            raise stop("runtime_error", "custom_work", answer.message, oom=answer.out_of_memory)
        if answer.fraction_error:
            self.env["custom_kernel_time_fraction_error"] = answer.fraction_error
        self.kernel_claim = answer.kernel_ms
        self.stage_s["custom_work"] = time.perf_counter() - start
        if self.torch_only_reason is not None:
            share = "n/a" if answer.fraction is None else f"{answer.fraction:.1%}"
            message = f"{self.torch_only_reason} (share of time in your own code: {share})"
            raise stop("rejected", "custom_work", message, [Violation(check="no_custom_kernel", message=message)])
        return answer.fraction


def run(request: RunRequest, shim: Standby, channel: Channel) -> RunResult:
    """All steps in order; a candidate fault ends the run with a result, never an exception."""
    from cuda_agent.judge.child.gauge import Gauge

    grader = gauge = eager_shim = None
    try:
        start = time.perf_counter()
        # A timed CPU run's gauge (child/gauge.py; not yet run on a GPU): started now, so that its import is over
        # before the calibration, and only where a run is timed (a check of correctness alone pays nothing).
        gauge = start_shim(namespace=False) if request.time and request.device == "cpu" else None
        # Eager timed now, by the candidate's protocol, in a process of ours that calls the reference.
        eager_shim = start_shim(namespace=False) if request.time and request.paired_eager else None
        grader = Grader(request, shim, channel)
        grader.ours_pids = [started[0].proc.pid for started in (gauge, eager_shim) if started is not None]
        grader.start_candidate_process()
        grader.load_reference()
        if gauge is not None:
            grader.gauge, gauge = Gauge(grader, gauge), None
        grader.stage_s["setup"] = time.perf_counter() - start
        calibrate(grader)
        grader.tick()
        grader.import_candidate()
        grader.tick()
        grader.correctness()
        timing = grader.timing() if request.time else None
        eager_now = None
        if request.time and request.paired_eager:
            started, eager_shim = eager_shim, None
            eager_now = time_reference(grader, started)
        fraction = grader.custom_work()
        kernel_timing = bound_claim(grader.kernel_claim, timing["median_ms"] if timing else None)
        return RunResult(
            status="ok",
            trials=grader.trials,
            timing=timing,
            flags=grader.flags,
            env=grader.env,
            stage_s=grader.stage_s,
            custom_kernel_time_fraction=fraction,
            kernel_timing=kernel_timing,
            eager_now=eager_now,
            group_calls=grader.group,
        )
    except Stop as ended:
        result = ended.result
        if grader is not None:
            result = result.model_copy(
                update={"trials": grader.trials, "flags": grader.flags, "env": grader.env, "stage_s": grader.stage_s}
            )
        return result
    finally:
        for unused in (gauge, eager_shim):  # never handed to a process of ours
            if unused is not None:
                unused[1].close()
                unused[0].close()
        if grader is not None:
            grader.exchange.close()
            grader.close_reading()
            if grader.gauge is not None:
                grader.gauge.close()


_shim: list[tuple[Standby, Channel]] = []


def start_shim(namespace: bool | None = None) -> tuple[Standby, Channel]:
    """Start a shim process now (it imports torch while we do): the candidate's (`namespace` None: confined as the
    judgement's environment says), or the gauge's (False: ours, never given candidate code). It dies with us (its
    parent-death signal), and on the CPU with its PID namespace (jail.py) whatever it started."""
    from cuda_agent.judge.child.shim import SOCKET_FD_ENV

    env = child_env()
    for name in ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MKL_NUM_THREADS", TURNS_ENV, "PYTHONPATH"):
        if name in os.environ:
            env[name] = os.environ[name]
    channel, theirs = Channel.pair()
    shim = Standby(
        "cuda_agent.judge.child.shim",
        env,
        namespace=os.environ.get(SHIM_NAMESPACE_ENV) == "1" if namespace is None else namespace,
        channel=(SOCKET_FD_ENV, theirs.fileno()),
        pid_namespace=os.environ.get("CUDA_VISIBLE_DEVICES") == "",  # CUDA IPC fails across PID namespaces
    )
    theirs.close()
    return shim, channel


def warm_up() -> None:
    """Before the request: the candidate's process started, imports, CUDA's set-up (in a shared GPU turn)."""
    _shim.append(start_shim())
    import torch
    import torch.utils.cpp_extension  # noqa: F401

    from cuda_agent.judge import env
    from cuda_agent.judge.child import compare, inputs, timing, trial  # noqa: F401
    from cuda_agent.tasks import problem  # noqa: F401

    if os.environ.get(TURNS_ENV) and torch.cuda.is_available():
        with set_up_turn():
            torch.cuda.init()
            env.describe_device("cuda")
    shim, _ = _shim[0]
    why_not = shim.wait_ready(SHIM_STARTUP_S)  # ready before we say so: the run's GPU turn must not wait for it
    if why_not:
        raise SystemExit(f"the candidate's process never got ready: {why_not}")


def _on_term(signum: int, frame: Any) -> None:
    """The pipeline's kill at a time limit: say where the candidate's process was (its stacks, which it dumps on the
    same signal, in its stderr), then go."""
    import faulthandler

    faulthandler.dump_traceback(all_threads=True)
    if _shim:
        shim = _shim[0][0]
        with contextlib.suppress(OSError):
            os.killpg(shim.proc.pid, signal.SIGTERM)  # its own group: it dumps its stacks on the signal
        time.sleep(0.5)
        sys.stderr.write("the candidate's process:\n" + shim.stderr_tail(6000) + "\n")
    sys.stderr.flush()
    os._exit(1)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, _on_term)
    if argv[:1] == ["--standby"]:
        order = await_request(warm_up)
        os.chdir(order.cwd)
        argv = order.args
    else:
        _shim.append(start_shim())
    request = read_record(RunRequest, Path(argv[0]).read_text(), "the judge's pipeline")
    if request.confine_user is None:  # unconfined: what the candidate starts stays below us, to end with it
        adopt_orphans()
    shim, channel = _shim[0]
    try:
        result = run(request, shim, channel)
    except TaskError as exc:  # the task itself is broken: not the candidate's fault
        result = RunResult(status="task_error", message=str(exc))
    except Exception as exc:  # our own code: never a verdict
        traceback.print_exc()
        result = RunResult(
            status="judge_error", message=f"{type(exc).__name__}: {exc}", out_of_memory=out_of_memory(exc)
        )
    finally:
        channel.close()
        shim.close()
        if request.confine_user is None:  # confined, its namespace and the sweep of its id end them
            kill_below(os.getpid())
    if result.status not in (*CANDIDATE_STATUSES, "ok", "task_error", "judge_error"):
        result = RunResult(status="judge_error", message=f"the grader produced status {result.status!r}")
    Path(argv[1]).write_text(result.model_dump_json())
    return {"task_error": 3, "judge_error": 4}.get(result.status, 0)


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # the result is on disk; no teardown in a CUDA context the candidate's kernels shared
