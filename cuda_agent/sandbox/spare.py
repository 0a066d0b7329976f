"""A judge stage's runner started ahead of its job, with the candidate's standby worker already started.

Why the runner, not the standby alone: a pool runs every stage of a job in a fresh runner process (execution.py)
that hardens itself (its cores, a pids cgroup, rlimits, no network) before the judge runs in it, and the judge
starts the candidate's process (judge/standby.py) as its own child, so that the child inherits all of that and
is reaped (and killed with its grader) by the one thread that judges. A standby started by the pool's own
process would have none of that hardening, and the runner could neither wait for it nor be its parent. Nor can
anything of one job's runner outlive that job. So what a timing slot keeps ahead is the next judge stage's
runner itself: hardened as that stage's runner would be, its standby started as a judgement with the previous
job's config would start one (`judge.start_spare`), waiting on stdin for its stage.

Two checks keep a spare honest: the pool hands a job the spare runner only when the job's own runner would have
started the same way (`SpareKey`: device, environment, cores, limits), and the judge uses the spare's standby
only when it would have started its own the same way (judge/standby.py `take_spare`: environment, namespace);
either one that does not fit, or has died, is closed and a fresh one started. Still one fresh process per
candidate: a spare is used once, and its runner ends with its stage.

The build workers keep spares of the prepare stage as well (`phase` "prepare"), whose standby is the build's
importing child (judge/build.py `--standby`, torch imported): a candidate's cold build then skips that start.

Run as `python -m cuda_agent.sandbox.runner --spare SPARE.json` (a SpareSpec), started ahead as every process of
ours is (`subproc.Ahead`); its one order on stdin is a `runner.RunnerOrder`. Stdin closed without one: it is
discarded (standby killed, exit 0).

What this does not protect against: as runner.py. A spare adds no access of its own: it is started as the fresh
runner of its stage would be, and its standby learns its candidate only on `go`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import tempfile
import threading
import uuid
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from cuda_agent.judge import JudgeConfig, Standby, start_spare
from cuda_agent.judge import judge as judge_candidate
from cuda_agent.judge import prepare as prepare_candidate
from cuda_agent.sandbox.execution import stage_env
from cuda_agent.sandbox.jobs import JudgeJob, SourceSolution
from cuda_agent.sandbox.limits import SandboxLimits, create_pids_cgroup, kill_cgroup
from cuda_agent.sandbox.runner import RunnerOrder, RunnerOutcome, RunnerSpec, harden, run_judge_phase, stage_config
from cuda_agent.subproc import Ahead, descendants, read_order, read_record
from cuda_agent.types import Task

log = logging.getLogger(__name__)
CLOSE_S = 10.0
"""How long a discarded spare may take to close its standby and exit before it is killed (its standby dies with
it: subproc.die_with_parent)."""
_GUESS_TASK = Task(ref="spare", name="spare", source="spare", code="")


class SpareSpec(BaseModel):
    """How a spare runner hardens itself and starts its standby (the fields `harden` reads, as in RunnerSpec)."""

    model_config = ConfigDict(extra="forbid")

    guess: JudgeJob
    """A job like the next one (the slot's previous judge job): its standby is started as this job's would be."""
    limits: SandboxLimits
    device: str
    """Resolved device ('cpu' or 'cuda') of the stage it will run."""
    workdir: str
    """Private folder of its stage (HOME and TMPDIR point here)."""
    cgroup: str | None = None
    cpus: list[int] = []
    """Cores it waits on: the build workers' (empty: any), so that its start never competes with a timing."""
    stage_cpus: list[int] = []
    """Cores of the stage it will run (a timing slot's): it moves there, with its standby, when handed its stage."""
    phase: Literal["judge", "prepare"] = "judge"
    """The stage it runs: judge (its standby is the candidate's process) or prepare (its standby is the build's
    importing child, judge/build.py)."""


@dataclass(frozen=True)
class SpareKey:
    """What a runner is started with, as far as the pool chooses it: a spare serves a stage with an equal key."""

    device: str
    env: tuple[tuple[str, str], ...]
    """The runner's environment (execution.stage_env), sorted: caches, CUDA_VISIBLE_DEVICES, PYTHONPATH."""
    cpus: tuple[int, ...]
    limits: str
    """The sandbox limits, as JSON."""

    @classmethod
    def of(cls, limits: SandboxLimits, device: str, env: dict[str, str], cpus: list[int]) -> SpareKey:
        return cls(device, tuple(sorted(env.items())), tuple(cpus), limits.model_dump_json())


class SpareRunner(Ahead):
    """A runner started now for a judge stage to come (pool side); `run_stage` gives it its stage, `close` ends it.

    Not dying with the thread that starts it (`start_child`'s `die_with_us`): a pool's thread starts it for a job
    that another thread may run; it ends when it reads the end of its stdin (the pool gone) or with its group."""

    def __init__(
        self,
        limits: SandboxLimits,
        device: str,
        env: dict[str, str],
        cpus: list[int],
        config: JudgeConfig,
        warm_cpus: list[int] | None = None,
        phase: Literal["judge", "prepare"] = "judge",
    ) -> None:
        """
        Args:
            limits, device, cpus: as the stage's run_stage would get them.
            env: the runner's environment (execution.stage_env of the slot's extra variables and `device`).
            config: the config the next job is expected to have (its standby is started for it).
            warm_cpus: the cores it starts on, until its stage (the build workers'; None or empty: any).
            phase: the stage it runs (SpareSpec.phase).
        """
        self.key = SpareKey.of(limits, device, env, cpus)
        self.folder = tempfile.TemporaryDirectory(prefix="cuda-agent-spare-")
        """Its stage's private folder; run_stage enters (and so removes) it as a fresh stage's own."""
        workdir = Path(self.folder.name)
        workdir.chmod(0o755)  # as run_stage's: the unprivileged user must be able to enter its own folder
        self.cgroup = create_pids_cgroup(f"spare-{uuid.uuid4().hex[:12]}", limits.max_pids) if limits.max_pids else None
        spec = SpareSpec(
            guess=JudgeJob(task=_GUESS_TASK, solution=SourceSolution(code=""), config=config),
            limits=limits,
            device=device,
            workdir=str(workdir),
            cgroup=self.cgroup and str(self.cgroup),
            cpus=warm_cpus or [],
            stage_cpus=cpus,
            phase=phase,
        )
        try:
            (workdir / "spare.json").write_text(spec.model_dump_json())
            with open(workdir / "stdout.txt", "wb") as out, open(workdir / "stderr.txt", "wb") as err:
                super().__init__(
                    [sys.executable, "-m", "cuda_agent.sandbox.runner", "--spare", str(workdir / "spare.json")],
                    cwd=workdir,
                    die_with_us=False,
                    env=env,
                    stdout=out,
                    stderr=err,
                )
        except BaseException:
            if self.cgroup is not None:
                kill_cgroup(self.cgroup)
            self.folder.cleanup()
            raise

    def unfit_for(self, key: SpareKey) -> str | None:
        """Why this spare may not run a stage whose runner would be started with `key`; None: it may."""
        if self.handed:
            return "it was used already"
        if self.proc.poll() is not None:
            return f"it had exited ({self.proc.returncode})"
        return "it was started otherwise" if key != self.key else None

    def run_stage(self, spec_file: Path, out_file: Path) -> subprocess.Popen:
        """Give it its stage (the runner's two arguments); its process, to wait for as a fresh runner's. One that died
        meanwhile is reported by the stage as a runner that died."""
        self.hand(RunnerOrder(spec_file=str(spec_file), out_file=str(out_file)))
        return self.proc

    def close(self) -> None:
        """End it, and whatever it started (safe to call twice, and after its stage). Unused, it first closes its
        standby itself (its stdin closed), so nothing is left to the kernel's signal."""
        self.end(CLOSE_S)
        if self.cgroup is not None:
            kill_cgroup(self.cgroup)
        self.folder.cleanup()


class Spares:
    """The spare runners one worker keeps for its next judge stages (LocalPool's timing worker, a Ray actor).

    The oldest is taken first (the longest warmed) and replaced at once, started as a judgement with the taker's
    config would start its runner and standby; a spare that would not serve its judge stage is closed, unused.
    """

    def __init__(
        self,
        count: int,
        limits: SandboxLimits,
        env: dict[str, str],
        cpus: list[int],
        warm_cpus: list[int],
        phase: Literal["judge", "prepare"] = "judge",
    ) -> None:
        """
        Args:
            count: spares to keep (0: none).
            phase: the stage its spares run (SpareSpec.phase).
            limits, cpus: as the worker's judge stages get them (run_stage).
            env: the worker's extra variables for its stages (run_stage's `extra_env`).
            warm_cpus: the cores spares start on, until their stage (empty: any).
        """
        self.count, self.limits, self.env, self.cpus, self.warm_cpus = count, limits, env, cpus, warm_cpus
        self.phase = phase
        self._spares: deque[SpareRunner] = deque()
        self._lock = threading.Lock()  # a Ray actor's close runs beside its job
        self._closed = False

    def keep(self, device: str, config: JudgeConfig) -> None:
        """Start runners for judge stages on `device` with `config` until `count` are kept (none once closed)."""
        with self._lock:
            while not self._closed and len(self._spares) < self.count:
                try:
                    env = stage_env(self.env, device)
                    spare = SpareRunner(self.limits, device, env, self.cpus, config, self.warm_cpus, self.phase)
                    self._spares.append(spare)
                except (OSError, subprocess.SubprocessError):  # the jobs still run, each with a runner of its own
                    log.warning("sandbox pool: could not start a spare judge runner", exc_info=True)
                    return

    @contextlib.contextmanager
    def taken(self, device: str, config: JudgeConfig, replace: bool = True) -> Iterator[SpareRunner | None]:
        """The oldest spare for a judge stage on `device` (None: a fresh runner, as none serves it); its replacement
        is started at once for `config` (`replace`). Closed when the stage is over, used or not."""
        with self._lock:
            spare = self._spares.popleft() if self._spares else None
        if replace:
            self.keep(device, config)
        key = SpareKey.of(self.limits, device, stage_env(self.env, device), self.cpus)
        try:  # one that does not fit (dead, or started for another device or environment) is closed after the stage
            yield spare if spare is not None and spare.unfit_for(key) is None else None
        finally:
            if spare is not None:
                spare.close()

    def close(self) -> None:
        """Close every spare kept; none is started after (safe to call twice)."""
        with self._lock:
            self._closed = True
            spares, self._spares = list(self._spares), deque()
        for spare in spares:
            spare.close()


def serve(spare_file: str) -> int:
    """The spare runner (runner.py `--spare`): harden, start the standby, then run the stage it is handed."""
    spare = read_record(SpareSpec, Path(spare_file).read_text(), "the pool")
    os.environ.update({"HOME": spare.workdir, "TMPDIR": spare.workdir})
    report = harden(spare)
    config = stage_config(spare.guess, spare)
    standby = start_spare(config, spare.phase)
    try:
        order = read_order(RunnerOrder)
        if order is None:
            return 0
        spec = read_record(RunnerSpec, Path(order.spec_file).read_text(), "the pool")
        started_as = (spec.phase, spec.limits, spec.device, spec.workdir, spec.cgroup, spec.cpus)
        if started_as != (spare.phase, spare.limits, spare.device, spare.workdir, spare.cgroup, spare.stage_cpus):
            outcome = RunnerOutcome(
                error="a spare runner was handed a stage it was not started for: a fault of the pool; retry the job",
                error_type="SandboxError",
            )
        else:
            report.cpus = _move_to(spec.cpus, standby)
            if spare.phase == "prepare":
                outcome = run_judge_phase(spec, lambda *args: prepare_candidate(*args, build_spare=standby))
            else:
                outcome = run_judge_phase(spec, lambda *args: judge_candidate(*args, spare=standby))
        outcome.hardening = report
        Path(order.out_file).write_text(outcome.model_dump_json())
        return 0
    finally:
        if standby is not None:
            standby.close()


def _move_to(cpus: list[int], standby: Standby | None) -> list[int]:
    """Put this process and every thread of its standby and of everything below it (the grader's candidate process,
    started confined through jail.py's holder, in a group of its own) on `cpus` (none: leave them where they are);
    the cores."""
    if not cpus:
        return []
    os.sched_setaffinity(0, cpus)
    if standby is not None:
        for pid in [standby.proc.pid, *(child for child, _ in descendants(standby.proc.pid))]:
            for thread in Path(f"/proc/{pid}/task").glob("*"):
                with contextlib.suppress(OSError):  # a thread that ended meanwhile
                    os.sched_setaffinity(int(thread.name), cpus)
    return cpus
