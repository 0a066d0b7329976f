"""The candidate's process: import the prebuilt solution, check it on fresh inputs, time it.

Run as `python -m cuda_agent.judge.child.worker REQUEST.json RESULT.json` by the grader, never in the
grader's own process. The order of events is the defence:
1. precision flags pinned and every harness function captured before candidate code loads;
2. the reference is loaded without registering it by name, and runs only after the candidate's
   call for the same trial, on separate copies of the inputs, so the candidate can neither call
   it nor reuse its freed output memory (threats 3, 10);
3. per trial: new seed, new allocations, poisoned free memory, the candidate's forward traced for
   ATen compute (1), outputs snapshotted right after a device-wide sync and compared again later
   (5, 6), inputs compared with their copies (11), flags and functions re-checked (8, 15);
4. timing on inputs drawn for each call alone, some calls' outputs judged, then one more correctness trial (9).

The process may be started ahead as a standby (`--standby`, standby.py): it imports torch and the
judge and sets up CUDA, then waits for its one request. After every step it writes a byte to the
grader's progress pipe, so a hang is caught at the step's limit, not at the whole run's.

Not protected here: native code that rewrites this process's memory or the result file. See
`guards.py` and the sandbox layer.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from cuda_agent.errors import TaskError
from cuda_agent.judge.build import loading_extensions
from cuda_agent.judge.child import guards
from cuda_agent.judge.child.hooks import HookWatch, OperatorWatch, profiled_ops
from cuda_agent.judge.child.stop import CANDIDATE_STATUSES, Stop, out_of_memory, stop
from cuda_agent.judge.child.timed_calls import TimedCalls
from cuda_agent.judge.protocol import RunRequest, RunResult
from cuda_agent.judge.standby import TURNS_ENV, mark_candidate, progress, serve_once, set_up_turn
from cuda_agent.types import Violation

_T = TypeVar("_T")


class CandidateRun:
    """State of one candidate process; methods are the steps, in order."""

    def __init__(self, request: RunRequest) -> None:
        import torch

        # Modules that rebind torch functions when first imported (dynamo wraps torch.manual_seed)
        # load before the capture, so only the candidate's own changes show.
        import torch._dynamo  # noqa: F401
        import torch.utils._python_dispatch  # noqa: F401
        import torch.utils.cpp_extension  # noqa: F401

        from cuda_agent.judge import env
        from cuda_agent.judge.child.timing import Clock

        self.req = request
        self.torch = torch
        self.tick = progress()
        """Tells the grader that a step finished (standby.py): its time limits are per step."""
        self.device = request.device
        self.flags = env.apply_precision_flags()
        cuda = self.device == "cuda"
        self.clock = Clock(
            time.perf_counter, torch.cuda.synchronize if cuda else None, torch.cuda.Event if cuda else None
        )
        self.trials: list[dict[str, Any]] = []
        self.candidate_started = False
        """Set just before the candidate's code first runs: an error of ours before it cannot be the candidate's."""
        self.stage_s: dict[str, float] = {}
        self.env = env.describe_device(self.device)
        self.l2 = guards.PersistingL2() if cuda else None
        self.l2_before = self.l2.limit_bytes() if self.l2 else 0
        self.env["l2_persistence_guard"] = bool(self.l2 and self.l2.available)
        self.env["l2_persisting_limit_bytes"] = self.l2_before
        # Last, after CUDA's set-up (which may bind names of its own), still before any candidate code.
        self.integrity = guards.capture_integrity()
        self.allocators = guards.AllocatorWatch()
        self.env["allocator_guard"] = sorted(self.allocators.before)

    def sync(self) -> None:
        if self.clock.synchronize is not None:
            self.clock.synchronize()

    def load_reference(self) -> None:
        from cuda_agent.tasks.problem import call_inputs, load_problem

        name = f"{self.req.task_name} (reference)"
        self.problem = load_problem(self.req.task_code, name, module_name="_cuda_agent_reference", register=False)
        self.init_args = call_inputs(self.problem, name, "get_init_inputs")
        self.torch.manual_seed(0)
        self.reference = self.problem.Model(*self.init_args).to(self.device)
        self.reference64 = None
        self.threads_before = guards.python_thread_count()
        guards.start_lazy_threads(self.torch)
        self.reference_ops = self.warm_reference() or set()
        between = self.between_calls_ops()
        self.native_before = guards.native_threads()
        self.hooks = HookWatch(self.torch)  # after torch's lazy set-up: what is registered now is not the candidate's
        self.operators = OperatorWatch(self.torch, self.reference_ops | between)
        self.known_ops_suffice = False
        """Whether the check before the judge's next own work may read only the operators known to it (`judging`)."""
        self.held = self.held_ids()

    def warm_reference(self) -> set[str] | None:
        """Run the reference once on inputs of its own, before any candidate code: the threads its libraries start on
        first use (cuDNN's, oneDNN's) then belong to the census the candidate is held to (guards.new_native_threads),
        and a reference that cannot run fails here, as ours, not in a trial after the candidate ran.

        Returns the operators it dispatched (`hooks.profiled_ops`), None where the profiler could not tell."""
        from cuda_agent.judge.child.inputs import make_inputs

        inputs = make_inputs(self.problem, self.req.task_name, self.req.recheck_seed + 3, self.device)
        try:
            with self.torch.no_grad():
                _, ops = profiled_ops(self.torch, lambda: self.reference(*inputs))
            self.sync()
        except Exception as exc:
            if out_of_memory(exc):  # memory another judgement holds: ours, retried (JudgeFault)
                raise
            raise TaskError(
                f"{self.req.task_name}: the reference's forward raised {type(exc).__name__}: {exc}"
            ) from None
        return ops

    def between_calls_ops(self) -> set[str]:
        """The operators the judge dispatches between the candidate's calls, outside any comparison: input draws
        (with the robustness transforms), input copies, the cache flush, the free-memory poison, the sampling of
        timed outputs. A kernel of the candidate's for one of them, registered in one call, would run in the work
        before the next (its inputs as they are drawn): the light operator reads (`judging`) cover them too. Sizes
        change no operator's name: all but the draw work on small stand-ins."""
        from cuda_agent.judge.child.inputs import clone_inputs, make_inputs
        from cuda_agent.judge.child.trial import changed_since, sample_outputs

        torch, device = self.torch, self.device

        def work() -> None:
            inputs = make_inputs(self.problem, self.req.task_name, self.req.recheck_seed + 4, device)
            tensors = [value for value in inputs if isinstance(value, torch.Tensor)]
            changed_since(self, sample_outputs(self, tensors, 1))  # as on a timed call's outputs
            small = torch.ones(8, device=device)
            clone_inputs([small])
            _ = (-small, small * 3.0 - 1.0)  # make_inputs's robustness transforms, 'negate' and 'stretch'
            torch.empty(8, dtype=torch.int32, device=device).fill_(0x5A5A5A5A)  # timing.make_flusher's write
            torch.empty(8, dtype=torch.uint8, device=device).fill_(0xFF)  # guards.poison_free_memory's

        _, ops = profiled_ops(torch, work)
        self.sync()
        return ops or set()

    def held_ids(self) -> dict[str, int]:
        """ids of the run's own objects that candidate code must not swap (checked by `check_state`)."""
        names = (
            *("req", "clock", "integrity", "allocators", "native_before", "hooks", "operators", "flags", "tick"),
            *("problem", "reference", "init_args"),
        )
        return {name: id(getattr(self, name, None)) for name in names}

    def import_candidate(self) -> None:
        import importlib.util

        start = time.perf_counter()
        os.environ["TORCH_EXTENSIONS_DIR"] = self.req.ext_dir
        sys.path[:0] = self.req.python_path
        spec = importlib.util.spec_from_file_location("cuda_agent_candidate", self.req.solution_path)
        module = importlib.util.module_from_spec(spec)
        # Module-level load_inline calls load (or finish building) here; see build.loading_extensions. The folder's
        # lock is taken before the candidate is marked as started: another judgement's process holding it (its
        # build of the same bytes) is our wait, so a limit that runs out there is our failure, never its timeout.
        try:
            with loading_extensions(Path(self.req.ext_dir)):
                self.candidate_started = True
                mark_candidate()
                spec.loader.exec_module(module)
        except Exception as exc:
            message = f"importing the solution raised {type(exc).__name__}: {exc}"
            raise stop("runtime_error", "import", message, cause=exc) from None
        model_cls = getattr(module, "ModelNew", None)
        if model_cls is None:
            raise stop("runtime_error", "import", "the solution defines no ModelNew") from None
        if isinstance(model_cls, type) and issubclass(model_cls, self.problem.Model):
            raise stop(
                "rejected",
                "import",
                "ModelNew derives from the reference Model",
                [Violation(check="subclasses_reference", message="ModelNew must derive from nn.Module only")],
            )
        self.check_state("import")
        try:
            self.torch.manual_seed(0)
            self.candidate = model_cls(*self.init_args).to(self.device)
        except Exception as exc:
            message = f"ModelNew(*get_init_inputs()) raised {type(exc).__name__}: {exc}"
            raise stop("runtime_error", "init", message, cause=exc) from None
        self.check_state("init")
        self.stage_s["import"] = time.perf_counter() - start

    def check_state(self, stage: str, judging: bool = False) -> None:
        """Everything the candidate could have changed since before its code ran; `judging`: before the judge's own
        work on a call's output, where the operator tables may be read for the known operators alone (`judging()`)."""
        start = time.perf_counter()
        try:
            self._check_state(stage, judging and self.known_ops_suffice)
        finally:
            self.count_check(start)

    def count_check(self, start: float) -> None:
        """What the watches cost a judgement, all checks together (the operator tables dominate), and their reads."""
        self.stage_s["state_checks"] = self.stage_s.get("state_checks", 0.0) + time.perf_counter() - start
        self.env["operator_reads"] = dict(self.operators.reads)

    def _check_state(self, stage: str, known_ops: bool) -> None:
        from cuda_agent.judge import env

        violations = []
        changed = guards.changed_functions(self.integrity)
        changed += [f"CandidateRun.{name}" for name, ident in self.held.items() if self.held_ids()[name] != ident]
        changed += [f"torch.nn.modules.module.{name}" for name in guards.global_module_hooks()]
        if changed:
            violations.append(Violation(check="patched_harness", message=f"replaced harness functions: {changed}"))
        flags = env.precision_flags()
        diff = {k: (self.flags[k], flags[k]) for k in self.flags if flags.get(k) != self.flags[k]}
        if diff:
            violations.append(Violation(check="global_state_changed", message=f"changed global flags {diff}"))
        if self.l2 is not None and self.l2.limit_bytes() > self.l2_before:
            message = f"the persisting-L2 set-aside was raised from {self.l2_before} to {self.l2.limit_bytes()} bytes"
            violations.append(Violation(check="l2_persistence", message=message))
        violations += self.allocator_violations() + self.hook_violations() + self.operator_violations(known_ops)
        if guards.python_thread_count() > self.threads_before:
            violations.append(Violation(check="background_thread", message="the solution started a Python thread"))
        elif stage != "custom_work":  # our profiler's own threads may start there (CUDA's, with kernel activity)
            violations += self.thread_violations()
        if violations:
            raise stop("rejected", stage, violations[0].message, violations) from None

    def operator_violations(self, known_only: bool = False) -> list[Violation]:
        """Kernels of the candidate's for torch's operators (hooks.OperatorWatch): all, or those the judge calls."""
        overridden = self.operators.overridden(known_only)
        if not overridden:
            return []
        message = f"the solution registered kernels of its own for torch's operators: {', '.join(overridden[:5])}"
        return [Violation(check="patched_harness", message=message)]

    def judging(self, stage: str, work: Callable[[], _T]) -> _T:
        """The judge's own work on a candidate call's output (`judge_trial`), with the operators it dispatched made
        known. Where the check before it read only the known operators, and this work called others, or the
        profiler saw none of the reference's (turned off), every operator is read before the result counts."""
        light = self.known_ops_suffice
        result, ops = profiled_ops(self.torch, work)
        seen = ops is not None and not ops.isdisjoint(self.reference_ops)
        new = ops is not None and seen and self.operators.watch(ops)
        self.known_ops_suffice = seen
        if light and (new or not seen):
            start = time.perf_counter()
            violations = self.operator_violations()
            self.count_check(start)
            if violations:
                raise stop("rejected", stage, violations[0].message, violations) from None
        return result

    def thread_violations(self) -> list[Violation]:
        """A native thread alive that was not before candidate code ran (guards.new_native_threads)."""
        started = guards.new_native_threads(self.native_before, self.device)
        if not started:
            return []
        message = (
            f"the solution left {len(started)} native thread(s) running between calls ({', '.join(started)}): a thread "
            "or pool of its own, or OpenMP teams larger than torch's thread setting"
        )
        return [Violation(check="background_thread", message=message)]

    def hook_violations(self) -> list[Violation]:
        """Hooks registered since before candidate code ran, through which its code would run inside ours (hooks.py)."""
        installed = self.hooks.installed()
        if not installed:
            return []
        message = f"the solution left hooks that run inside the judge's own code: {', '.join(installed)}"
        return [Violation(check="patched_harness", message=message)]

    def allocator_violations(self) -> list[Violation]:
        """torch's CPU or CUDA allocator is no longer the one it was before candidate code ran (guards.AllocatorWatch)."""
        replaced = self.allocators.replaced()
        if not replaced:
            return []
        message = (
            f"the solution replaced torch's {' and '.join(replaced)} allocator (its code would run in the judge's)"
        )
        return [Violation(check="global_state_changed", message=message)]

    def plain(self, out: Any, stage: str) -> list[Any]:
        """forward's result as a flat list of plain tensors (trial.plain_outputs), before the judge reads it at all."""
        from cuda_agent.judge.child.trial import plain_outputs

        flat = plain_outputs(self.torch, out)
        if flat is None:
            message = f"forward returned a {type(out).__name__}: return a tensor, or a list or tuple of plain tensors"
            raise stop("rejected", stage, message, [Violation(check="non_tensor_output", message=message)])
        return flat

    def call_candidate(self, inputs: list[Any]) -> tuple[Any, dict[str, int]]:
        tracer = guards.make_tracer()
        try:
            with self.torch.no_grad(), tracer:
                out = self.candidate(*inputs)
        except Exception as exc:  # a Stop of ours among them: raised by its code, it would say what the run found
            raise stop(
                "runtime_error", "trial", f"ModelNew.forward raised {type(exc).__name__}: {exc}", cause=exc
            ) from None
        try:
            violations = self.allocator_violations()  # before the judge's next allocation (see TimedCalls.after_call)
            if violations:
                raise stop("rejected", "trial", violations[0].message, violations)
            out = self.plain(out, "trial")
            self.sync()
            self.tick()
        except Stop:
            raise
        except Exception as exc:
            message = f"ModelNew.forward raised {type(exc).__name__}: {exc}"
            raise stop("runtime_error", "trial", message, cause=exc) from None
        return out, tracer.disallowed

    def run_trial(self, seed: int, transform: str, label: str) -> None:
        from cuda_agent.judge.child.inputs import clone_inputs, make_inputs
        from cuda_agent.judge.child.trial import judge_trial

        inputs = make_inputs(self.problem, self.req.task_name, seed, self.device, transform)
        given = clone_inputs(inputs)
        guards.poison_free_memory(self.device)
        out, disallowed = self.call_candidate(given)
        if disallowed and self.req.policy == "cuda-agent":  # kernelbench: torch may compute (custom_work checks)
            ops = ", ".join(f"{k} x{v}" for k, v in sorted(disallowed.items()))
            raise stop(
                "rejected",
                "trial",
                f"torch computed part of the output: {ops}",
                [Violation(check="torch_compute_at_runtime", message=f"ATen compute ops ran in forward: {ops}")],
            )
        self.check_state("trial", judging=True)
        judged = self.judging("trial", lambda: judge_trial(self, inputs, given, out, seed, transform, label))
        self.record_trial(judged, label)

    def record_trial(self, trial: dict[str, Any], stage: str, context: str = "") -> None:
        """Keep a judged trial; a failed one ends the run (`context` goes before its reason)."""
        self.trials.append(trial)
        if not trial["ok"]:
            check = "reduced_precision" if trial.get("precision") else trial.get("violation")
            violations = [Violation(check=check, message=trial["reason"])] if check else []
            raise stop("rejected" if check else "incorrect", stage, context + trial["reason"], violations) from None

    def correctness(self) -> None:
        start = time.perf_counter()
        for seed in self.req.seeds:
            self.run_trial(seed, "identity", "trial")
        if self.req.robustness:
            for transform in ("negate", "stretch"):
                self.run_trial(self.req.seeds[0] + 7919, transform, "robustness")
        self.stage_s["correctness"] = time.perf_counter() - start

    def timing(self) -> dict[str, Any]:
        from cuda_agent.judge.child.timing import make_flusher, time_phase

        start = time.perf_counter()
        flush = make_flusher(self.device, self.env.get("l2_bytes"), self.l2.reset if self.l2 else None)
        calls = TimedCalls(self)
        try:
            phase = time_phase(
                calls.call,
                calls.inputs_for,
                self.clock,
                flush,
                self.device,
                warmup_reps=self.req.warmup_reps,
                min_reps=self.req.min_reps,
                max_reps=self.req.max_reps,
                target_phase_s=self.req.target_phase_s,
                tick=calls.after_call,
                spent=calls.spent,
            )
        except Stop:
            raise
        except Exception as exc:
            if calls.ours:
                raise
            message = f"ModelNew.forward raised while timed: {type(exc).__name__}: {exc}"
            raise stop("runtime_error", "timing", message, cause=exc) from None
        self.check_state("timing")
        calls.check_last()
        self.stage_s["timing"] = time.perf_counter() - start - self.stage_s.get("timed_outputs", 0.0)
        self.run_trial(self.req.recheck_seed, "identity", "recheck")
        return phase.summary()

    def check_timed_output(
        self, inputs: list[Any], given: list[Any], out: Any, index: int, positions_seed: int | None
    ) -> bool:
        """Judge the output of the phase's `index`-th call as a trial's, label `timed`: `inputs` as drawn, `given` as
        the call left them; screened at positions drawn from `positions_seed` first (`trial.screen_trial`; None: in
        full). Precision against float64 was the trials' business (and would double the cost). Returns whether it
        was judged on every element (not passed by the screen)."""
        from cuda_agent.judge.child.trial import judge_trial, screen_trial

        start = time.perf_counter()
        seed = self.req.timing_seed + index
        trial = None
        if positions_seed is not None:
            trial = self.judging("timing", lambda: screen_trial(self, inputs, given, out, seed, positions_seed))
        if trial is None:
            trial = self.judging(
                "timing", lambda: judge_trial(self, inputs, given, out, seed, "identity", "timed", False)
            )
        self.record_trial(trial, "timed", "a timed call's output is wrong: ")
        self.stage_s["timed_outputs"] = self.stage_s.get("timed_outputs", 0.0) + time.perf_counter() - start
        return "screened" not in trial

    # --- policy/runtime.py (issue 22): the candidate's own share of forward, and under kernelbench that it counts ---
    def custom_work(self) -> float | None:
        """Two extra untimed calls on fresh inputs: the share of forward's time in the candidate's own code
        (every policy), and under the kernelbench policy, that its kernels reach its outputs (policy/runtime.py).

        Returns:
            custom_kernel_time_fraction, or None where nothing could be measured.
        """
        from cuda_agent.judge.child.inputs import make_inputs
        from cuda_agent.judge.policy import runtime as policy_runtime

        start = time.perf_counter()
        seed = self.req.recheck_seed + 1

        def call(inputs: list[Any]) -> Any:
            try:
                with self.torch.no_grad():
                    out = self.candidate(*inputs)
            except Exception as exc:
                message = f"ModelNew.forward raised {type(exc).__name__}: {exc}"
                raise stop("runtime_error", "custom_work", message, cause=exc) from None
            return self.plain(out, "custom_work")

        inputs = make_inputs(self.problem, self.req.task_name, seed, self.device, "identity")
        try:
            fraction = policy_runtime.custom_time_fraction(lambda: call(inputs), self.device, self.sync)
        except policy_runtime.ProfileUnreadable as exc:  # a report, not a gate: say why it is missing
            fraction, self.env["custom_kernel_time_fraction_error"] = None, str(exc)
        self.tick()  # each extra call is a step of its own for the grader's per-step limit
        reason = None
        if self.req.policy == "kernelbench":
            inputs = make_inputs(self.problem, self.req.task_name, seed + 1, self.device, "identity")
            held = [*inputs, *self.candidate.parameters(), *self.candidate.buffers()]
            sources = [t for t in held if isinstance(t, self.torch.Tensor)]
            tolerance = policy_runtime.Tolerance(self.req.atol, self.req.rtol, self.req.norm_rtol)
            reason = policy_runtime.torch_only_reason(lambda: call(inputs), sources, self.sync, tolerance)
            self.tick()
        self.check_state("custom_work")
        self.stage_s["custom_work"] = time.perf_counter() - start
        if reason is not None:
            share = "n/a" if fraction is None else f"{fraction:.1%}"
            message = f"{reason} (share of time in your own code: {share})"
            raise stop("rejected", "custom_work", message, [Violation(check="no_custom_kernel", message=message)])
        return fraction


def run(request: RunRequest) -> RunResult:
    """All steps in order; a candidate fault ends the run with a result, never an exception."""
    state = None
    try:
        start = time.perf_counter()
        state = CandidateRun(request)
        state.stage_s["setup.torch_and_device"] = time.perf_counter() - start
        state.load_reference()
        state.stage_s["setup"] = time.perf_counter() - start
        state.tick()
        state.import_candidate()
        state.tick()
        state.correctness()
        timing = state.timing() if request.time else None
        fraction = state.custom_work()
        return RunResult(
            status="ok",
            trials=state.trials,
            timing=timing,
            flags=state.flags,
            env=state.env,
            stage_s=state.stage_s,
            custom_kernel_time_fraction=fraction,
        )
    except Stop as ended:
        result = ended.result
        if result.status not in CANDIDATE_STATUSES:  # never one of ours (`stop`): the candidate's code raised it
            message = f"the solution's code raised the judge's own run-ending exception, claiming {result.status!r}"
            result = RunResult(status="runtime_error", stage=result.stage, message=message)
        if state is not None:
            result = result.model_copy(
                update={"trials": state.trials, "flags": state.flags, "env": state.env, "stage_s": state.stage_s}
            )
        return result
    except TaskError:
        raise
    except Exception as exc:
        # Raised in our own code, never inside one of the candidate's calls (those end with a Stop above).
        # Before the candidate ran, or an allocation failure anywhere (our comparison and inputs need
        # memory that a judgement beside us may hold), it is our failure. After the candidate ran, any
        # other error of our checks may have been provoked by it (odd outputs, patched modules): its fault.
        if state is None or not state.candidate_started or out_of_memory(exc):
            raise JudgeFault(exc) from exc
        message = f"the judge's checks failed after the candidate's code ran: {type(exc).__name__}: {exc}"
        return RunResult(status="runtime_error", stage="judge", message=message, trials=state.trials, env=state.env)


class JudgeFault(Exception):
    """Our own code failed in the candidate's process: reported to the grader as a `judge_error`, never a verdict."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.out_of_memory = out_of_memory(cause)


def warm_up() -> None:
    """What a standby does before its request: imports, torch's lazy threads and CUDA set-up, no GPU kernel.

    CUDA's context is made in a shared GPU turn (gpu_turns.py), so never during another process's timing.
    """
    import torch
    import torch._dynamo  # noqa: F401
    import torch.utils._python_dispatch  # noqa: F401
    import torch.utils.cpp_extension  # noqa: F401

    from cuda_agent.judge import env  # noqa: F401
    from cuda_agent.judge.child import compare, inputs, timing, trial  # noqa: F401
    from cuda_agent.tasks import problem  # noqa: F401

    # CPU only: torch's OpenMP team and the tracer's profiler (its first start costs ~1.5 s), off the request's time.
    guards.start_lazy_threads(torch)
    if os.environ.get(TURNS_ENV) and torch.cuda.is_available():
        with set_up_turn():
            torch.cuda.init()
            env.describe_device("cuda")


def main(argv: list[str]) -> int:
    import faulthandler
    import signal

    # At the time limit the grader sends SIGTERM before SIGKILL: the stacks show where the run hung.
    faulthandler.register(signal.SIGTERM, all_threads=True)
    if argv[:1] == ["--standby"]:
        argv = serve_once(warm_up)
    request = RunRequest.model_validate_json(Path(argv[0]).read_text())
    try:
        result = run(request)
    except TaskError as exc:  # the reference itself is broken: not the candidate's fault
        result = RunResult(status="task_error", message=str(exc))
    except JudgeFault as exc:
        result = RunResult(status="judge_error", message=str(exc), out_of_memory=exc.out_of_memory)
    Path(argv[1]).write_text(result.model_dump_json())
    return {"task_error": 3, "judge_error": 4}.get(result.status, 0)  # for a person reading a log; the file decides


if __name__ == "__main__":
    code = main(sys.argv[1:])
    # The result is on disk: skip interpreter teardown, which can hang in a CUDA context that a
    # faulting kernel left broken (or in the candidate's own atexit hooks).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
