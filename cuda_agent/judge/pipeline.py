"""The judge: policy -> build -> run (correctness, runtime checks, timing) -> baselines -> Verdict.

`judge()` is the library call behind `cuda-agent judge`. It never runs candidate code in its process: the
build, the run (grader and candidate's process, DESIGN.md) and the baselines are children, killed at their limits. A candidate fault of
any kind comes back as a Verdict; only our own failures raise (JudgeInfraError): no GPU when one
was asked for, our code failing in the candidate's process before the candidate ran or running out
of memory outside the candidate's calls (retried once), a baseline that could not be timed.
A verdict judged before is answered from the verdict cache (verdict_cache.py).

What this does not protect against: a candidate process that escapes through the OS where the judge
runs it as ours (no unprivileged user or mount namespace here: confine.py, and env.candidate_isolation
says why). Static policy forbids the means; network isolation, resource limits and a pids cgroup are
the sandbox's job (sandbox/runner.py).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import logging
import platform
import pwd
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from cuda_agent.errors import JudgeInfraError, ProtocolError, TaskError
from cuda_agent.gpu_turns import turns_for
from cuda_agent.judge.baseline_stage import baseline_key, measure_baselines
from cuda_agent.judge.basis import verdict_timings
from cuda_agent.judge.build import build_solution, build_spec, ext_dir_for
from cuda_agent.judge.config import JudgeConfig
from cuda_agent.judge.confine import candidate_user, hand_over, private_copy
from cuda_agent.judge.env import PROTOCOL_VERSION
from cuda_agent.judge.fast_build import Preparing, finish_prepare
from cuda_agent.judge.kernel_build import build_kernels_as
from cuda_agent.judge.policy import check_policy
from cuda_agent.judge.protocol import BaselineResult, RunRequest, RunResult
from cuda_agent.judge.solution import SolutionSource, read_solution
from cuda_agent.judge.standby import SPARE, Standby, StandbySpec, take_spare, worker_spec
from cuda_agent.judge.uids import UidLease, leased
from cuda_agent.judge.verdict_cache import VerdictCache, verdict_key
from cuda_agent.judge.watched import run_watched
from cuda_agent.machine import detect_device, driver_version, gpu_name
from cuda_agent.reward import decided_on, reward_of
from cuda_agent.subproc import child_env, read_record, run_module
from cuda_agent.types import Task, Timings, Verdict, Violation
from cuda_agent.workspace.build import BUILD_DIR, glue_hash
from cuda_agent.workspace.layout import tampered_files

log = logging.getLogger(__name__)
Result = TypeVar("Result", bound=BaseModel)  # what a child of the judgement writes: RunResult, BaselineResult


def require_gpu(device: str) -> None:
    """Raise at once when `device` is 'cuda' and no GPU is visible, rather than fail every stage later.

    Raises:
        JudgeInfraError: no GPU is visible on this machine.
    """
    if device == "cuda" and detect_device("auto") != "cuda":
        raise JudgeInfraError("device 'cuda' was asked for, but no GPU is visible here (nvidia-smi lists none)")


def _triton_version() -> str | None:
    """The installed triton's version, read from its metadata (no import); None where it is not installed."""
    try:
        return importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        return None


def require_language(language: str) -> None:
    """Raise at once when a Triton solution meets a judge without triton, rather than fail in the candidate's process.

    Raises:
        JudgeInfraError: triton is not importable here.
    """
    if language == "triton" and importlib.util.find_spec("triton") is None:
        raise JudgeInfraError("a Triton solution needs triton where the judge runs: pip install -e '.[triton]'")


def _task_dtypes(task: Task) -> set[str] | None:
    """Reduced-precision dtypes a task names in its source (read, not run); none: the policy holds it to fp32."""
    named = {f"torch.{d}" for d in ("float16", "half", "bfloat16") if re.search(rf"\b{d}\b", task.code)}
    return named | {"torch.float32"} if named else None


class _Judgement:
    """One judgement's working state; each method is one stage."""

    def __init__(self, task: Task, solution: SolutionSource, config: JudgeConfig) -> None:
        self.task, self.solution, self.cfg = task, solution, config
        self.device = detect_device(config.device)
        self.stage_s: dict[str, float] = {}
        self.env: dict[str, Any] = {"protocol_version": PROTOCOL_VERSION, "precision_mode": config.precision}
        self.cacheable = True
        """False once the outcome depended on the machine's load (a timeout, a killed process, an OOM) or on what
        the candidate wrote in its result file: such a verdict is judged again next time, never cached."""
        self.standby: Standby | None = None
        """The candidate's process, started ahead (standby.py); used once by run()."""
        self.standby_origin = "started ahead"
        """How `standby` came to be (env.standby_worker): started ahead by us, or a spare started by our caller."""
        self.candidate_ran = False
        """The run's worker said the candidate's code was about to run (standby.CANDIDATE)."""
        self.preparing: Preparing | None = None
        """The build's `prepare`, which may still run: waited for before CPU timing and at the end."""
        self.limits = config.run_limits(None, "unknown")
        """The run's time limits: derived from the cached eager time once run() has looked for it."""
        self.baseline_before: BaselineResult | None = None
        self.baseline_read = False
        """Whether `baseline_before` was read, before the candidate's code ran (`run`)."""
        self.user, why_not = (
            candidate_user(config.candidate_user, config.cache_dir) if config.candidate_user else (None, None)
        )
        """Whom the candidate's code runs as (None: as us); a leased id's stand-in until `candidate` leases one."""
        self.lease: UidLease | None = None
        if self.user is not None:
            self.env["candidate_user"] = "a user id of its own" if leased(self.user.pw_uid) else self.user.pw_name
        if why_not:
            self.env["candidate_isolation"] = why_not

    def candidate(self) -> pwd.struct_passwd | None:
        """The user the candidate's code runs as now: a leased id (uids.py) on first need, held until `close`."""
        if self.user is None or not leased(self.user.pw_uid):
            return self.user
        if self.lease is None:
            try:
                self.lease = UidLease.claim()
            except OSError as exc:
                raise JudgeInfraError(f"no user id for the candidate: {exc}") from exc
            self.env["candidate_uid"] = self.lease.user.pw_uid
        return self.lease.user

    def close(self) -> None:
        """End what the candidate left (every process and shared-folder file of its leased id) and free the id."""
        why_not = self.lease.release() if self.lease is not None else None
        if why_not:
            log.warning("candidate user id kept: %s", why_not)

    def verdict(self, name: str, message: str = "", **fields: Any) -> Verdict:
        timings = fields.pop("timings_ms", Timings())
        correct = fields.pop("correct", False)
        reward = reward_of(name, timings)
        return Verdict(
            task=self.task.ref,
            verdict=name,
            reward=reward,
            correct=correct,
            message=message,
            timings_ms=timings,
            device=self.env.get("device_name", self.device),
            stage_s=self.stage_s,
            env=self.env,
            policy=self.cfg.policy,
            language=self.solution.language,
            **fields,
        )

    def cache_key(self) -> str:
        machine: dict[str, Any] = {"device_name": gpu_name() if self.device == "cuda" else "cpu"}
        if self.device == "cuda":
            machine["driver"] = driver_version()
        else:  # CPU timings belong to this machine's cores
            machine["host"] = platform.node()
        if self.solution.language == "triton":  # its compiler (and on the CPU its interpreter) made the kernels
            machine["triton"] = _triton_version()
        confined_as = self.user.pw_name if self.user is not None else None
        return verdict_key(self.task.code, self.solution.content_hash, self.cfg, self.device, machine, confined_as)

    def cached(self) -> Verdict | None:
        """The verdict of the same candidate judged before, if the cache is on and has it."""
        if not self.cfg.verdict_cache:
            return None
        return VerdictCache(self.cfg.cache_dir / "verdicts").get(self.cache_key(), self.task.ref)

    def store(self, verdict: Verdict) -> Verdict:
        """Keep a deterministic verdict for the next identical candidate; returns it, marked as not cached."""
        verdict = verdict.model_copy(update={"env": {**verdict.env, "verdict_cached": False}})
        if self.cfg.verdict_cache and self.cacheable:
            VerdictCache(self.cfg.cache_dir / "verdicts").put(self.cache_key(), verdict)
        return verdict

    def policy(self) -> Verdict | None:
        """The solution's size and encoding (whatever the static policy), then the static policy's rejection."""
        start = time.monotonic()
        if (unjudged := self.solution.too_large() or self.solution.foreign_encoding()) is not None:
            return self.verdict("rejected", unjudged.message, violations=[unjudged])
        if not self.cfg.static_policy:
            self.env["static_policy"] = False
            return None
        violations = check_policy(
            self.solution, self.device, task_dtypes=_task_dtypes(self.task), policy=self.cfg.policy
        )
        self.stage_s["policy"] = time.monotonic() - start
        if violations:
            return self.verdict("rejected", f"static policy: {violations[0].message}", violations=violations)
        return None

    def protected_files(self) -> Verdict | None:
        """A workspace whose read-only files differ from the package's copies is rejected."""
        if self.solution.root is None:
            return None
        changed = tampered_files(self.solution.root, self.task)
        if not changed:
            return None
        message = f"read-only workspace files were changed: {', '.join(changed)}"
        return self.verdict(
            "rejected", message, violations=[Violation(check="protected_file_modified", message=message)]
        )

    def build(self, solution_file: Path, spare: Standby | None = None) -> tuple[Verdict | None, Path]:
        """The build stage; `spare`: an importing child started ahead by our caller (build.build_spec), used where
        it was started as ours would be (build_solution)."""
        build_hash = self.solution.build_hash
        if self.solution.root is not None:
            build_hash = f"{build_hash}|workspace|{glue_hash()}"
        result = build_solution(
            solution_file,
            build_hash,
            self.device,
            self.cfg.cache_dir,
            self.cfg.build_timeout_s,
            kernels=self.build_workspace_kernels if self.builds_workspace else None,
            # A Triton file compiles its kernels at their first launch (the run stage's first, untimed call).
            import_needed=(self.solution.root is None and self.solution.language == "cuda")
            or self.solution.builds_inline,
            python_path=self.module_path(ext_dir_for(build_hash, self.device, self.cfg.cache_dir)),
            user=self.candidate(),
            standby=spare,
        )
        self.stage_s["build"] = result.wall_s
        self.env["build_cached"] = result.cached
        if spare is not None and spare.went is not None:  # handed the build (not a cached one, nor a workspace's)
            self.env["build_worker"] = SPARE
        if result.stale:
            self.env["build_stale"] = result.stale  # a cached build that was incomplete, and so built again
        if result.header_retries:
            self.env["build_header_retries"] = result.header_retries
        if result.unfinished:
            self.env["build_unfinished"] = result.unfinished  # the run stage's import meets it (or compiles the rest)
        self.preparing = result.preparing
        if result.timed_out:
            self.cacheable = False
            return self.verdict("timeout", result.log, compile_log=result.log), result.ext_dir
        if not result.ok:
            return self.verdict("compile_error", "compilation failed", compile_log=result.log), result.ext_dir
        return None, result.ext_dir

    def finish_preparing(self) -> None:
        """Wait for the `prepare` that the build started (BuildResult.preparing), killed past the build's limit."""
        finish_prepare(self.preparing, self.cfg.build_timeout_s)
        self.preparing = None

    @property
    def builds_workspace(self) -> bool:
        """A workspace whose kernels/ are built into `cuda_extension` (a Triton workspace's kernels are in its
        model_new.py)."""
        return self.solution.root is not None and self.solution.language == "cuda"

    def module_path(self, ext_dir: Path) -> list[str]:
        """Where a workspace solution's `cuda_extension` is built (none for a single file or a Triton workspace)."""
        return [str(ext_dir / "src" / BUILD_DIR)] if self.builds_workspace else []

    def build_workspace_kernels(self, ext_dir: Path) -> tuple[bool, str]:
        """Compile a workspace's kernels/ (the judged bytes, copied) with the package's fixed glue, as the candidate:
        whatever the compiler reads, and quotes in its errors, it reads with the candidate's rights (kernel_build)."""
        src = ext_dir / "src"
        kernels = src / "kernels"
        kernels.mkdir(parents=True, exist_ok=True)
        for name, text in self.solution.sources.items():
            path = src / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        outcome = build_kernels_as(self.candidate(), src, self.device, self.cfg.build_timeout_s, self.cfg.cache_dir)
        return outcome.ok, outcome.log  # not ok when timed out; its log says so ("build exceeded")

    def standby_spec(self) -> StandbySpec:
        """What this judgement starts its candidate's process with (a spare must match it: `take_standby`)."""
        turns = turns_for(self.cfg.cache_dir).folder if self.device == "cuda" else None
        return worker_spec(
            self.device, self.cfg.cpu_threads, turns, namespace=self.user is not None, cache_dir=self.cfg.cache_dir
        )

    def start_standby(self) -> Standby:
        """Start the candidate's process now; it imports torch and sets up CUDA while we build (standby.py)."""
        self.standby = Standby.start(self.standby_spec())
        return self.standby

    def take_standby(self, spare: Standby | None) -> None:
        """Our candidate's process: `spare` (started ahead by our caller) where it fits (standby.take_spare)."""
        self.standby, self.standby_origin, why_not = take_spare(spare, self.standby_spec())
        if why_not:
            self.env["standby_spare_discarded"] = why_not

    def discard_standby(self) -> None:
        if self.standby is not None:
            self.standby.close()
            self.standby = None

    @contextlib.contextmanager
    def gpu_turn(self, stage: str, shared: bool = False) -> Iterator[None]:
        """This judgement's turn on its GPU (gpu_turns.py): exclusive for a candidate's or a baseline's process.
        Records the seconds waited and held, in all (`gpu_wait`, `gpu_held`) and for `stage` (`gpu_held.run`)."""
        if self.device != "cuda":
            yield
            return
        turns = turns_for(self.cfg.cache_dir)
        try:
            with turns.shared() if shared else turns.exclusive():
                yield
        finally:
            self.count_turn(stage, turns.waited_s, turns.held_s)

    def count_turn(self, stage: str, waited_s: float, held_s: float) -> None:
        for key, seconds in (("gpu_wait", waited_s), ("gpu_held", held_s)):
            self.stage_s[key] = self.stage_s.get(key, 0.0) + seconds
            self.stage_s[f"{key}.{stage}"] = self.stage_s.get(f"{key}.{stage}", 0.0) + seconds

    def cached_baseline(self) -> BaselineResult | None:
        path = self.baseline_file()
        return BaselineResult.model_validate_json(path.read_text()) if path.exists() else None

    def baseline_file(self) -> Path:
        return self.cfg.cache_dir / "baselines" / f"{baseline_key(self.task.code, self.device, self.cfg)}.json"

    def run(self, solution_file: Path, ext_dir: Path, workdir: Path) -> RunResult | Verdict:
        cfg = self.cfg
        # Read before any candidate code runs, and used by the baselines stage: a candidate that rewrote the cached
        # file during its run would otherwise be timed against its own numbers.
        self.baseline_before, self.baseline_read = self.cached_baseline(), True
        base = self.baseline_before if cfg.adaptive_limits else None
        eager_ms = base.eager["median_ms"] if base and base.eager else None
        self.limits = cfg.run_limits(eager_ms, "cached baseline" if eager_ms is not None else "unknown")
        self.env["run_limits"] = self.limits.model_dump()
        candidate_dir = workdir / "candidate"
        candidate_dir.mkdir()
        solution_file = Path(shutil.copy2(solution_file, candidate_dir / solution_file.name))  # where it can read
        confinement = None
        user = self.candidate()
        if user is not None:
            confinement = private_copy(ext_dir, workdir / "private", user, cfg.cache_dir)
            hand_over(candidate_dir, user)  # the candidate's folder alone; the request and result stay ours
            workdir.chmod(0o711)  # the way to it open to the candidate's user, not a listing, not a write
        request = RunRequest(
            python_path=self.module_path(ext_dir),
            task_code=self.task.code,
            task_name=self.task.name,
            solution_path=str(solution_file),
            ext_dir=str(ext_dir),
            device=self.device,
            trials=cfg.trials,
            robustness=cfg.robustness_trials,
            time=cfg.time,
            atol=cfg.atol,
            rtol=cfg.rtol,
            norm_rtol=cfg.norm_rtol,
            strict_precision=cfg.precision == "strict",
            precision_factor=cfg.precision_factor,
            precision_floor=cfg.precision_floor,
            warmup_reps=cfg.warmup_reps,
            min_reps=cfg.min_reps,
            max_reps=cfg.max_reps,
            target_phase_s=cfg.target_phase_s,
            ci_width=cfg.timing_ci_width,
            max_phase_s=cfg.max_phase_s,
            paired_eager=self.device in cfg.paired_eager,
            group_calls=self.baseline_before.group_calls if self.baseline_before else None,
            max_group_calls=cfg.max_group_calls,
            release_per_call=cfg.release_per_call and self.device == "cpu",
            screen_min_elems=cfg.screen_min_elems,
            policy=cfg.policy,
            language=self.solution.language,
            candidate_dir=str(candidate_dir),
            confine_user=confinement.user.pw_uid if confinement and confinement.user else None,
            confine_binds=confinement.binds if confinement else (),
            confine_hidden=confinement.hidden if confinement else (),
            confine_shown=confinement.shown if confinement else (),
        )
        result = self.run_child(
            "cuda_agent.judge.child.grader",
            request,
            RunResult,
            workdir,
            cfg.run_timeout_s,
            {"TORCH_EXTENSIONS_DIR": str(ext_dir)},
            stage="run",
        )
        if isinstance(result, Verdict):
            return result
        return self.run_result(result)

    def run_result(self, result: RunResult) -> RunResult:
        """The grader's result (the grader is ours: the candidate's process never writes it).

        Raises:
            TaskError: the task itself is broken (its reference failed).
            JudgeInfraError: our own code failed in the grader.
        """
        if result.status == "task_error":
            raise TaskError(result.message)
        if result.status == "judge_error":
            raise JudgeInfraError(
                f"the judge's own code failed in the run stage, not the candidate's: {result.message}",
                out_of_memory=result.out_of_memory,
            )
        if result.out_of_memory:
            self.cacheable = False  # whether its allocation fits depends on what else held memory
        return result

    def run_child(
        self,
        module: str,
        request: BaseModel,
        kind: type[Result],
        workdir: Path,
        timeout_s: float,
        extra_env: dict[str, str],
        stage: str,
        turn: bool = True,
    ) -> Result | Verdict:
        """Run `module`'s child on `request` in `workdir` (ours alone: the candidate's process has a folder of its own
        below it) and read its result file, a `kind` (JudgeInfraError where it is none: the child is ours)."""
        request_path, result_path = workdir / f"{stage}_request.json", workdir / f"{stage}_result.json"
        request_path.write_text(request.model_dump_json())
        env = child_env(extra_env)
        if self.device != "cuda":
            env["CUDA_VISIBLE_DEVICES"] = ""
            threads = str(self.cfg.cpu_threads)
            env.update(OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
        start = time.monotonic()
        args = [str(request_path), str(result_path)]
        limit = f"it exceeded {timeout_s:.0f} s"
        if stage == "run":
            child, limit = run_watched(self, args, env, workdir)
        else:
            # Parallel baseline runs (a timing lock) time one at a time by that lock and share the GPU otherwise.
            with self.gpu_turn(stage, shared=self.cfg.timing_lock is not None) if turn else contextlib.nullcontext():
                child = run_module(module, args, timeout_s=timeout_s, env=env, cwd=workdir)
        self.stage_s[stage] = time.monotonic() - start
        # A result only from a child that exited: unconfined, a candidate killed the grader beside its own (u1).
        if not (written := not child.timed_out and (child.returncode or 0) >= 0 and result_path.exists()):
            self.cacheable = False
            if stage == "run" and not self.candidate_ran:
                tail = " ".join(child.stderr.strip().splitlines()[-3:])
                how = f"hung ({limit})" if child.timed_out else f"died (exit {child.returncode})"
                raise JudgeInfraError(
                    f"the judge's worker {how} before the candidate's code ran: our failure, not the candidate's; "
                    f"retry the judgement ({tail or 'no output'})"
                )
        if child.timed_out:
            # The child dumps its Python stack on SIGTERM before the kill: say where it was stuck.
            tail = "\n".join(child.stderr.strip().splitlines()[-12:])
            where = f"; where it was: {tail}" if tail else ""
            return self.verdict("timeout", f"the {stage} stage was killed: {limit}{where}")
        if not written:
            tail = "\n".join(child.stderr.strip().splitlines()[-8:])
            if stage == "run" and self.user is not None:  # a candidate confined to another user cannot kill us
                raise JudgeInfraError(f"the judge's grader died (exit {child.returncode}): our failure; {tail}")
            return self.verdict("runtime_error", f"the {stage} process died (exit {child.returncode}): {tail}")
        try:
            return read_record(kind, result_path.read_text(errors="replace"), f"the {stage} stage's process")
        except ProtocolError as exc:
            raise JudgeInfraError(f"the {stage} stage's result file is malformed: {exc}") from exc

    def baselines(self, workdir: Path, group_calls: int | None = None) -> BaselineResult:
        return measure_baselines(self, workdir, group_calls)

    def finish(self, run: RunResult, base: BaselineResult | None) -> Verdict:
        # The candidate process's own steps, so a slow judgement shows where its time went.
        self.stage_s.update({f"run.{step}": seconds for step, seconds in run.stage_s.items()})
        self.env.update(run.env)
        if self.device == "cuda":
            self.env["driver"] = driver_version()
        self.env["flags"] = run.flags
        self.env["device_name"] = run.env.get("device_name", self.device)
        if run.status != "ok":
            verdict = run.status if run.status in ("compile_error", "incorrect", "rejected") else "runtime_error"
            return self.verdict(
                verdict,
                run.message,
                compile_log=run.compile_log,
                violations=run.violations,
                checks=run.trials,
                custom_kernel_time_fraction=run.custom_kernel_time_fraction,
            )
        solution_ms = _median(run.timing)
        if base is not None:
            self.env["timing"] = {
                "solution": run.timing,
                "eager": base.eager,
                "compile": base.compile,
                "compile_error": base.compile_error,
            }
        floor = self.cfg.timing_noise_floor.get(self.device, 0.0)
        timings = verdict_timings(run, base, floor, self.env, self.cfg.kernel_basis)
        t = decided_on(timings)
        return self.verdict(
            "pass",
            "correct" + (" and timed" if solution_ms else ""),
            correct=True,
            timings_ms=timings,
            checks=run.trials,
            speedup_vs_eager=t.eager / t.solution if t.solution and t.eager else None,
            speedup_vs_compile=t.compile / t.solution if t.solution and t.compile else None,
            custom_kernel_time_fraction=run.custom_kernel_time_fraction,
        )


def _median(summary: dict[str, Any] | None) -> float | None:
    """A timed phase's median (ms), None where it was not timed."""
    return summary["median_ms"] if summary else None


def prepare(
    task: Task, solution: SolutionSource | Path, config: JudgeConfig | None = None, build_spare: Standby | None = None
) -> Verdict | None:
    """The CPU half of a judgement: static policy and build, without running the candidate.

    `build_spare`: the build's importing child, started ahead by the caller (`start_spare`), used if it fits this
    build; the caller closes it if it was not (closing twice is safe).

    A scheduler runs this on a build worker and then `judge()` on a timing worker, which finds
    the build in the content-keyed cache. Returns the failing Verdict (rejected, compile_error,
    timeout), or None when the candidate may go on to run. Raises as `judge()` does.
    """
    config = config or JudgeConfig()
    source = solution if isinstance(solution, SolutionSource) else read_solution(Path(solution))
    j = _Judgement(task, source, config)
    rejected = j.protected_files()
    if rejected is not None:
        return rejected
    cached = j.cached()
    if cached is not None:  # the whole judgement is known: the job ends here, without a GPU turn
        return cached
    rejected = j.policy()
    if rejected is not None:
        return j.store(rejected)
    with tempfile.TemporaryDirectory(prefix="cuda-agent-build-") as tmp:
        solution_file = Path(tmp) / "solution.py"
        solution_file.write_text(source.python)
        try:
            failed, _ext_dir = j.build(solution_file, build_spare)
        finally:
            j.finish_preparing()  # a pool's job ends with its cgroup killed: the prepare would go with it
            j.close()
    return j.store(failed) if failed is not None else None


def judge(
    task: Task, solution: SolutionSource | Path, config: JudgeConfig | None = None, spare: Standby | None = None
) -> Verdict:
    """Judge one candidate against its task.

    Args:
        task: the reference problem.
        solution: a SolutionSource, or a path to a single-file solution or a workspace folder.
        config: judge settings (defaults follow the paper).
        spare: a candidate's process started ahead by the caller (`start_spare`), used if it fits this judgement
            (`take_standby`); the caller closes it if it was not (closing twice is safe).

    Returns:
        The Verdict; a candidate's failure of any kind is a verdict, not an exception.

    Raises:
        SolutionError: the solution path cannot be read at all.
        TaskError: the reference itself is broken.
        JudgeInfraError: the judge failed for a reason that is not the candidate's.
    """
    config = config or JudgeConfig()
    require_gpu(config.device)
    source = solution if isinstance(solution, SolutionSource) else read_solution(Path(solution))
    require_language(source.language)
    j = _Judgement(task, source, config)
    rejected = j.protected_files()
    if rejected is not None:
        return rejected
    cached = j.cached()
    if cached is not None:
        return cached
    try:
        return j.store(_judge_fresh(j, spare))
    finally:
        j.close()


def start_spare(config: JudgeConfig, stage: Literal["judge", "prepare"] = "judge") -> Standby | None:
    """A process for a judgement not known yet, started as one with `config` would start its own (a long-lived
    caller keeps one ahead: sandbox/spare.py): the candidate's (`judge`'s spare) or the build's importing child
    (`prepare`'s build_spare); None where the config starts none ahead."""
    if not config.standby_worker:
        return None
    j = _Judgement(Task(ref="spare", name="spare", source="spare", code=""), SolutionSource(python=""), config)
    if stage == "judge":
        return j.start_standby()
    return Standby.start(build_spec(j.device, namespace=j.user is not None, cache_dir=config.cache_dir))


def _judge_fresh(j: _Judgement, spare: Standby | None = None) -> Verdict:
    rejected = j.policy()
    if rejected is not None:
        return rejected
    if j.cfg.standby_worker:
        j.take_standby(spare)  # a fresh one's start (torch, CUDA) overlaps the build and is off our GPU turn
    try:
        return _judge_built(j)
    finally:
        j.discard_standby()
        j.finish_preparing()  # it ran beside the run stage; a pool's job ends with its cgroup killed


def _judge_built(j: _Judgement) -> Verdict:
    with tempfile.TemporaryDirectory(prefix="cuda-agent-judge-") as tmp:
        workdir = Path(tmp)
        solution_file = workdir / "solution.py"
        solution_file.write_text(j.solution.python)
        failed, ext_dir = j.build(solution_file)
        if failed is not None:
            return failed
        if j.device != "cuda" and j.cfg.time:
            j.finish_preparing()  # its compiles would share the cores we time on (and baseline times are kept)
        try:
            run = j.run(solution_file, ext_dir, workdir)
        except JudgeInfraError as exc:
            if not exc.out_of_memory:
                raise
            run = _run_again(j, ext_dir, exc)
        if j.lease is not None:  # nothing it left running (CUDA: no PID namespace) may share the baselines' timing
            j.lease.sweep()
        if isinstance(run, Verdict):
            return run
        if not (j.cfg.time and run.status == "ok"):
            return j.finish(run, None)
    with tempfile.TemporaryDirectory(prefix="cuda-agent-baseline-") as tmp:
        # Not the candidate's folder: it may own it, and have left links or modules there for us.
        return j.finish(run, j.baselines(Path(tmp), run.group_calls))  # in groups of as many calls as the run's


def _run_again(j: _Judgement, ext_dir: Path, first: JudgeInfraError) -> RunResult | Verdict:
    """The run stage once more after our own code ran out of memory, in a fresh folder (the first one is the
    candidate's now). A second failure before the candidate's code ran is ours as well; one after it is the
    candidate's runtime_error (not cached): in fresh processes the same shortage points to the memory its code
    holds."""
    j.cacheable = False
    j.env["run_attempts"] = 2
    with tempfile.TemporaryDirectory(prefix="cuda-agent-judge-") as tmp:
        workdir = Path(tmp)
        solution_file = workdir / "solution.py"
        solution_file.write_text(j.solution.python)
        try:
            return j.run(solution_file, ext_dir, workdir)
        except JudgeInfraError as exc:
            if exc.out_of_memory and j.candidate_ran:
                detail = str(exc).rpartition("not the candidate's: ")[2]
                return j.verdict(
                    "runtime_error", f"out of memory after the candidate's code ran, on both tries: {detail}"
                )
            raise JudgeInfraError(f"{exc} (and again on a second try; first: {first})", exc.out_of_memory) from exc


def reference_timings(task: Task, config: JudgeConfig | None = None) -> BaselineResult:
    """Eager and torch.compile timings of the task's reference (cached on disk like a judgement's).

    Raises:
        TaskError: the reference fails when run.
        JudgeInfraError: the timing process itself failed.
    """
    j = _Judgement(task, SolutionSource(python=""), config or JudgeConfig())
    with tempfile.TemporaryDirectory(prefix="cuda-agent-baseline-") as tmp:
        return j.baselines(Path(tmp))
