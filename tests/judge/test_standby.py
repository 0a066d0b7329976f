"""The candidate's process started ahead (standby.py) and its per-step time limit (JudgeConfig.run_limits)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from cuda_agent.gpu_turns import GpuTurns
from cuda_agent.judge import JudgeConfig, judge, start_spare
from cuda_agent.judge.standby import SPARE, TURNS_ENV, Standby, StandbySpec, take_spare
from cuda_agent.subproc import Confinement, child_env
from cuda_agent.types import Task
from tests.judge.helpers import EXAMPLES, ROOT, example_solution, run_judge, with_forward_body

CHILD = "tests.judge.standby_child"


def _standby(**kw) -> Standby:
    standby = Standby(CHILD, child_env(), **kw)
    assert standby.wait_ready(120) is None
    return standby


def test_a_ticking_child_outlives_its_step_limit_and_runs_in_the_folder_it_is_given(tmp_path: Path) -> None:
    standby = _standby()
    out = tmp_path / "out.json"
    standby.go(["6", "0.4", str(out)], tmp_path, {}, None)
    child, killed_by = standby.wait(step_s=1.5, total_s=60)
    assert (killed_by, child.returncode, child.timed_out) == ("", 0, False)
    assert child.wall_s > 2.0  # 2.4 s in all, longer than one step's limit
    assert json.loads(out.read_text())["cwd"] == str(tmp_path)


def test_a_silent_child_is_killed_at_the_step_limit(tmp_path: Path) -> None:
    standby = _standby()
    standby.go(["1", "30", str(tmp_path / "out.json")], tmp_path, {}, None)
    start = time.monotonic()
    child, killed_by = standby.wait(step_s=1.0, total_s=60)
    assert killed_by == "step" and child.timed_out and child.returncode is None
    assert time.monotonic() - start < 5
    assert not (tmp_path / "out.json").exists()


def test_a_child_that_exits_is_done_even_if_a_process_it_left_holds_the_pipe(tmp_path: Path) -> None:
    standby = _standby()
    standby.go(["1", "0.1", str(tmp_path / "out.json"), "--leave-a-child"], tmp_path, {}, None)
    child, killed_by = standby.wait(step_s=20, total_s=60)
    assert (killed_by, child.returncode) == ("", 0) and child.wall_s < 5
    assert (tmp_path / "out.json").exists()


def test_the_whole_run_has_a_limit_too(tmp_path: Path) -> None:
    standby = _standby()
    standby.go(["100", "0.2", str(tmp_path / "out.json")], tmp_path, {}, None)
    child, killed_by = standby.wait(step_s=5.0, total_s=1.5)
    assert killed_by == "total" and child.timed_out and 1.4 < child.wall_s < 6


@pytest.mark.parametrize(
    ("name", "seconds", "grace_s", "killed_by"),
    [("ninja", 4, 600, ""), ("sleeper", 4, 600, "step"), ("ninja", 6, 2, "step")],
    ids=["a_build_goes_on", "another_program_does_not", "up_to_the_builds_own_limit"],
)
def test_a_build_running_in_the_child_holds_off_its_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, seconds: int, grace_s: float, killed_by: str
) -> None:
    # CI (2026-12-06) saw correct kernels killed as `timeout` while torch's loader compiled inside the run stage
    # (ninja, past the 30 s step): the compile is not the candidate's hang. Any other silent program is.
    import cuda_agent.judge.standby as standby_module

    monkeypatch.setattr(standby_module, "BUILD_GRACE_S", grace_s)
    program = tmp_path / name
    program.write_text(f"#!/bin/sh\nsleep {seconds}\n")  # named so: the kernel takes a script's name as its command
    program.chmod(0o755)
    standby = _standby()
    standby.go(["--candidate", "--run", str(program), "0", "0", str(tmp_path / "out.json")], tmp_path, {}, None)
    child, killed = standby.wait(step_s=1.0, total_s=1.5)
    assert killed == killed_by
    if killed_by:
        assert standby.build_grace_s <= grace_s and not (tmp_path / "out.json").exists()
    else:
        assert child.returncode == 0 and (tmp_path / "out.json").exists()
        assert seconds - 2 <= standby.build_grace_s <= seconds + 1  # past the 1 s step, for as long as it built


@pytest.mark.parametrize(
    ("argv", "killed_by", "candidate_started"),
    [
        (["--candidate", "1", "30"], "step", True),
        (["--candidate", "0", "0"], "", True),
        (["1", "30"], "step", False),
        (["0", "0"], "", False),
    ],
    ids=["said_then_hung", "said_then_exited", "silent_hang", "exited_without_saying"],
)
def test_whether_the_candidates_code_ran_is_what_the_child_said_before_it_ended(
    tmp_path: Path, argv: list[str], killed_by: str, candidate_started: bool
) -> None:
    # The byte may still be unread when the limit is already past (we looked late): it counts all the same, or
    # a candidate that ran and then hung or crashed would be taken for a failure of ours (and dropped). A child
    # that had exited by then ended in time.
    standby = _standby()
    standby.go([*argv, str(tmp_path / "out.json")], tmp_path, {}, None)
    time.sleep(1.0)  # past the step limit before we look
    child, how = standby.wait(step_s=0.5, total_s=60)
    assert (standby.candidate_started, how, child.timed_out) == (candidate_started, killed_by, bool(killed_by))


def test_ready_time_is_when_the_child_got_ready_not_when_we_looked() -> None:
    standby = Standby(CHILD, child_env())
    time.sleep(8)  # the judgement's build, meanwhile
    assert standby.wait_ready(120) is None
    assert standby.ready_s is not None and standby.ready_s < 7.9
    standby.close()


def test_the_start_up_limit_counts_neither_our_build_nor_the_childs_wait_for_a_gpu_turn(tmp_path: Path) -> None:
    standby = Standby(CHILD, child_env())
    time.sleep(2)  # our build, meanwhile, outlasts the start-up limit below: the child got ready long before
    assert standby.wait_ready(1) is None
    standby.close()
    held = threading.Event()

    def time_something() -> None:  # another judgement's timing holds the GPU alone for 4 s
        with GpuTurns(tmp_path).exclusive():
            held.set()
            time.sleep(4)

    timing = threading.Thread(target=time_something)
    timing.start()
    held.wait()
    standby = Standby(CHILD, {**child_env(), TURNS_ENV: str(tmp_path)})
    assert standby.wait_ready(2) is None
    timing.join()
    assert 3 < standby.turn_wait_s < 4.5 and standby.ready_s is not None and standby.ready_s > 3.5
    standby.close()


def test_a_standby_that_dies_while_warming_up_says_why() -> None:
    standby = Standby("tests.judge.no_such_module", child_env())
    why_not = standby.wait_ready(120)
    assert why_not is not None and "before it was ready" in why_not and "No module named" in why_not


def test_a_discarded_standby_runs_nothing_and_leaves_no_process() -> None:
    standby = _standby()
    pid = standby.proc.pid
    standby.close()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.skipif(os.geteuid() != 0, reason="confinement (mounts, another user) needs root")
def test_a_standby_ends_up_confined_as_a_child_started_confined_would() -> None:
    nobody = pwd.getpwnam("nobody")
    root = Path(tempfile.mkdtemp(prefix="standby-test-"))  # pytest's own folder is root's alone (0700)
    root.chmod(0o755)
    shared, private, work = root / "shared", root / "private", root / "work"
    for folder in (shared, private, work):
        folder.mkdir()
        os.chown(folder, nobody.pw_uid, nobody.pw_gid)
    (private / "only_in_the_copy").touch()
    standby = _standby(namespace=True)
    out = work / "out.json"
    confine = Confinement(user=nobody, binds=((str(private), str(shared)),))
    standby.go(["0", "0", str(out), str(shared)], work, {}, confine)
    child, killed_by = standby.wait(step_s=30, total_s=60)
    assert killed_by == "" and child.returncode == 0, child.stderr
    report = json.loads(out.read_text())
    assert report == {"cwd": str(work), "uid": nobody.pw_uid, "listing": ["only_in_the_copy"]}
    assert os.listdir(shared) == []  # the mount was the child's alone
    shutil.rmtree(root)


@pytest.mark.parametrize(("eager_ms", "task"), [(0.1, "L1/12"), (2.7, "L1/1"), (186.1, "L1/68, the slowest of L1")])
def test_adaptive_limits_catch_a_hang_within_a_minute_and_let_a_20x_slower_kernel_finish(
    eager_ms: float, task: str
) -> None:
    cfg = JudgeConfig()
    limits = cfg.run_limits(eager_ms)
    slow_call_s = cfg.slowdown_allowed * eager_ms / 1e3
    assert limits.step_s <= 60, task  # a hang is a step that never ends: caught within a minute
    assert slow_call_s * cfg.limit_margin <= limits.step_s - cfg.step_floor_s + 1e-9, task
    calls = cfg.trials + 2 + 1 + cfg.warmup_reps + cfg.min_reps
    assert limits.total_s >= calls * slow_call_s + cfg.target_phase_s, task  # the whole slow run fits
    assert limits.total_s <= cfg.run_timeout_s
    assert cfg.run_limits(None).step_s == cfg.step_floor_s  # unknown eager time: the floor
    assert JudgeConfig(adaptive_limits=False).run_limits(eager_ms).step_s == 600


SPIN = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor spin_forward(torch::Tensor x) {
    volatile int64_t i = 0;
    while (i >= 0) {
        i = i + 1;
        if (i > 4000000000000000000LL) i = 0;
    }
    return torch::empty_like(x);
}
"""

spin_ext = load_inline(name="tests_spin_cpu", cpp_sources=cpp_source, functions=["spin_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return spin_ext.spin_forward(x.contiguous())
'''


@pytest.mark.slow
def test_a_spinning_cpp_kernel_times_out_within_the_adaptive_limit(tmp_path: Path) -> None:
    # The extension's function holds the GIL while it spins: only a limit kept outside the process can end it.
    verdict = run_judge(tmp_path, "examples/relu", SPIN)
    limits = verdict.env["run_limits"]
    assert verdict.verdict == "timeout" and verdict.reward == -1, verdict.message
    assert limits["step_s"] == JudgeConfig().run_limits(limits["eager_ms"]).step_s  # from the cached eager time
    assert "one step of it" in verdict.message and "in forward" in verdict.message, verdict.message  # its stack
    # Killed by the step's limit (the message says so), not the old 600 s: the spinning step itself ran its limit
    # and was ended within the kill's grace of it. The steps before it (loading the reference and the candidate,
    # the reference's call) are not the hang's: CI's busy 2 cores once stretched them by 22 s, so only the run's
    # total limit bounds the whole.
    stage = verdict.stage_s
    assert limits["step_s"] <= stage["run.last_step"] < limits["step_s"] + 5, stage
    assert stage["run.last_step"] <= stage["run.after_go"] < limits["total_s"], stage
    assert verdict.stage_s["run"] >= verdict.stage_s["run.after_go"]
    assert verdict.env["standby_worker"] == "started ahead"


GRADER = """
import sys
from pathlib import Path
from cuda_agent.judge import JudgeConfig, judge
from cuda_agent.tasks import Catalog
config = JudgeConfig(device="cpu", time=False, static_policy=False, verdict_cache=False, adaptive_limits=False)
judge(Catalog().resolve("examples/relu"), Path(sys.argv[1]), config)
"""


@pytest.mark.slow
def test_a_candidate_dies_with_a_grader_that_is_killed(tmp_path: Path) -> None:
    # Seen on the H200: a spinning C++ candidate ran on for 80 minutes after its grader died. The candidate may
    # run as nobody in namespaces of its own: it names itself, for us to find it, and marks where nobody can write
    # (under /dev/shm: its /tmp is its own, jail.private_folders).
    mark = Path(tempfile.mkdtemp(prefix="standby-test-", dir="/dev/shm"), "ran")
    mark.parent.chmod(0o777)
    body = (
        f"import ctypes\nctypes.CDLL(None).prctl(15, {CANDIDATE_NAME!r}, 0, 0, 0)\n"
        f"open({str(mark)!r}, 'w').close()\nreturn spin_ext.spin_forward(x)"
    )
    solution = tmp_path / "solution.py"
    solution.write_text(with_forward_body(SPIN, body))
    grader = subprocess.Popen([sys.executable, "-c", GRADER, str(solution)], cwd=ROOT, start_new_session=True)
    deadline = time.monotonic() + 240  # the build, when the spinning kernel's is not cached yet
    while not mark.exists() and grader.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    candidates = _named(CANDIDATE_NAME.decode())
    grader.kill()
    grader.wait()
    shutil.rmtree(mark.parent)
    assert candidates, "the candidate never ran"
    try:
        gone_by = time.monotonic() + 5
        while any(_alive(pid) for pid in candidates) and time.monotonic() < gone_by:
            time.sleep(0.1)
        assert not any(_alive(pid) for pid in candidates), "the candidate outlived its grader"
    finally:
        for pid in candidates:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


CANDIDATE_NAME = b"spinning-cand"


def _named(name: str) -> list[int]:
    """The processes (ids as this machine sees them) named `name`."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == name:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for a reaper that is no parent of ours does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# A spare: a standby started ahead of a judgement not known yet (take_spare).


def _spec(**env_changes: str) -> StandbySpec:
    return StandbySpec.of(CHILD, {**child_env(), **env_changes})


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"CUDA_VISIBLE_DEVICES": "1"}, "CUDA_VISIBLE_DEVICES"),  # another GPU
        ({TURNS_ENV: "/elsewhere/turns"}, TURNS_ENV),  # another GPU's turns, or none
        ({"PYTHONPATH": "/elsewhere"}, "PYTHONPATH"),  # other code
        ({"OMP_NUM_THREADS": "7"}, "OMP_NUM_THREADS"),  # other CPU threads
    ],
    ids=["device", "gpu_turns", "python_path", "cpu_threads"],
)
def test_a_spare_started_with_another_environment_is_closed_and_a_fresh_standby_started(
    changes: dict[str, str], named: str
) -> None:
    spare = Standby.start(_spec())
    wanted = _spec(**changes)
    standby, origin, why_not = take_spare(spare, wanted)
    try:
        assert standby is not spare and origin == "started ahead" and standby.spec == wanted
        assert why_not == f"it was started otherwise: env {named}"
        assert spare.proc.poll() is not None  # closed, not left running
    finally:
        standby.close()


def test_a_spare_outside_the_namespace_a_confined_judgement_needs_does_not_fit() -> None:
    spare = Standby.start(_spec())  # no namespace of its own: it could not mount the candidate's private copy
    try:
        assert spare.unfit_for(dataclasses.replace(_spec(), namespace=True)) == "it was started otherwise: namespace"
        assert spare.unfit_for(_spec()) is None
    finally:
        spare.close()


def test_a_spare_that_fits_is_used_once() -> None:
    spare = Standby.start(_spec())
    standby, origin, why_not = take_spare(spare, _spec())
    assert (standby, origin, why_not) == (spare, SPARE, None)
    assert standby.wait_ready(120) is None
    standby.go(["0", "0", os.devnull], Path.cwd(), {}, None)
    standby.wait(step_s=20, total_s=60)
    again, origin, why_not = take_spare(spare, _spec())  # offered twice: a new one
    try:
        assert again is not spare and origin == "started ahead" and why_not == "it was used or closed already"
    finally:
        again.close()


def test_a_spare_that_died_is_replaced_not_used() -> None:
    spare = _standby()
    os.killpg(spare.proc.pid, signal.SIGKILL)
    spare.proc.wait()
    standby, origin, why_not = take_spare(spare, spare.spec)
    try:
        assert standby is not spare and origin == "started ahead" and why_not == "it had exited (-9)"
        assert standby.wait_ready(120) is None
    finally:
        standby.close()


@pytest.mark.slow
def test_a_spare_that_dies_after_it_was_taken_is_replaced_before_the_run(tmp_path: Path) -> None:
    # Taken alive at the judgement's start, it dies while it still imports torch (seconds; the judgement reaches
    # its run in well under one): its death is no one's verdict, and the run gets a process of its own.
    solution = tmp_path / "solution.py"
    solution.write_text(example_solution("relu"))
    task = Task(ref="inline/relu", name="relu", source="inline", code=(EXAMPLES / "problems" / "relu.py").read_text())
    config = JudgeConfig(device="cpu", time=False, trials=1, verdict_cache=False)
    judge(task, solution, config)  # the build, cached for the judgement below
    spare = start_spare(config)
    assert spare is not None
    threading.Timer(0.6, os.killpg, (spare.proc.pid, signal.SIGKILL)).start()
    verdict = judge(task, solution, config, spare=spare)
    assert (verdict.verdict, verdict.env["standby_worker"]) == ("pass", "started for the run")
    assert "exited (-9) before it was ready" in verdict.env["standby_spare_discarded"]
    assert verdict.stage_s["run.standby_wait"] > 0.5  # it waited for the replacement's start
