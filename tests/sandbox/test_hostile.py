"""Hostile candidates: each yields exactly one clear result, and the pool judges a good solution after.

The static policy is switched off where it would reject the hostile code before it runs: these
tests are about what the sandbox does to a process that misbehaves, not about the policy.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from cuda_agent.sandbox.jobs import CommandJob, JobResult, make_judge_job
from cuda_agent.sandbox.limits import SandboxLimits
from cuda_agent.sandbox.local import LocalPool
from tests.sandbox.helpers import FAST, RELU, assert_still_judges, hostile_forward

RUNTIME_ONLY = {**FAST, "static_policy": False}


@pytest.fixture(scope="module")
def pool():
    # 4 GiB of address space: a memory hog stops there instead of filling this 24 GiB machine.
    # Four workers on two cores: most hostile jobs sit out a time limit, so they run side by side.
    limits = SandboxLimits(address_space_bytes=4 * 2**30, max_pids=128)
    with LocalPool(build_workers=4, limits=limits) as pool:
        yield pool


BOMB = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
HOSTILE_JUDGE_JOBS = {
    "fork_bomb": make_judge_job(
        task="examples/relu", solution=BOMB + RELU, config={**RUNTIME_ONLY, "build_timeout_s": 8.0}
    ),
    "memory_hog": make_judge_job(
        task="examples/relu",
        solution=hostile_forward("hog = [bytearray(2**28) for _ in range(64)]\nreturn relu_ext.relu_forward(x)"),
        config=RUNTIME_ONLY,
    ),
    "infinite_loop": make_judge_job(
        task="examples/relu",
        solution=hostile_forward("while True:\n    pass"),
        config={**RUNTIME_ONLY, "run_timeout_s": 8.0},
    ),
    "os_exit": make_judge_job(
        task="examples/relu", solution=hostile_forward("import os\nos._exit(0)"), config=RUNTIME_ONLY
    ),
    # A hang that outlasts the judge's own limits (as a hung GPU kernel can): the pool's kill is the backstop.
    "hung_kernel": make_judge_job(
        task="examples/relu",
        solution=hostile_forward("import time\ntime.sleep(10**6)"),
        config=RUNTIME_ONLY,
        timeout_s=15.0,
    ),
}


@pytest.fixture(scope="module")
def hostile(pool: LocalPool) -> dict[str, JobResult]:
    futures = {name: pool.submit(job) for name, job in HOSTILE_JUDGE_JOBS.items()}
    return {name: future.result(timeout=300) for name, future in futures.items()}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    tmp_path.chmod(0o755)
    return tmp_path


def _pids_bounded(pool: LocalPool, folder: Path) -> bool:
    probe = pool.run(CommandJob(argv=["true"], cwd=str(folder), timeout_s=10))
    return bool(probe.hardening.get("cgroup")) or probe.hardening.get("user") is not None


def test_fork_bomb_command_is_contained(pool: LocalPool, folder: Path) -> None:
    if not _pids_bounded(pool, folder):
        pytest.skip("neither a pids cgroup nor an unprivileged user is available: a fork bomb would hit the host")
    result = pool.run(CommandJob(argv=["bash", "-c", "f() { f | f & }; f; sleep 30"], cwd=str(folder), timeout_s=5))
    assert result.status == "done"
    assert result.command.timed_out and result.command.exit_code is None
    assert "fork" in result.command.stderr or "Resource temporarily unavailable" in result.command.stderr
    assert not Path(result.hardening["cgroup"]).exists()  # every process of the job is gone


@pytest.mark.slow
def test_fork_bomb_in_solution_is_contained(hostile: dict[str, JobResult]) -> None:
    result = hostile["fork_bomb"]
    assert result.status == "done", result.error
    assert result.verdict.verdict == "timeout" and result.verdict.reward == -1


def test_memory_hog_command_gets_memory_error(pool: LocalPool, folder: Path) -> None:
    hog = "chunks = []\nwhile True:\n    chunks.append(bytearray(2**28))"
    result = pool.run(CommandJob(argv=["python", "-c", hog], cwd=str(folder), timeout_s=60))
    assert result.status == "done"
    assert result.command.exit_code == 1 and "MemoryError" in result.command.stderr
    assert result.hardening["rlimits"]["RLIMIT_AS"] == 4 * 2**30


@pytest.mark.slow
def test_memory_hog_in_forward_is_runtime_error(hostile: dict[str, JobResult]) -> None:
    result = hostile["memory_hog"]
    assert result.status == "done", result.error
    assert result.verdict.verdict == "runtime_error" and "MemoryError" in result.verdict.message


def test_infinite_loop_in_forward_times_out(hostile: dict[str, JobResult]) -> None:
    result = hostile["infinite_loop"]
    assert result.status == "done", result.error
    assert result.verdict.verdict == "timeout" and "killed" in result.verdict.message


def test_os_exit_in_forward_is_runtime_error(hostile: dict[str, JobResult]) -> None:
    result = hostile["os_exit"]
    assert result.status == "done", result.error
    assert result.verdict.verdict == "runtime_error" and "died" in result.verdict.message


def test_hung_kernel_is_killed_at_the_job_limit(hostile: dict[str, JobResult]) -> None:
    result = hostile["hung_kernel"]
    assert result.status == "done", result.error
    assert result.verdict.verdict == "timeout" and "sandbox killed" in result.verdict.message


def test_pool_judges_a_good_solution_after_every_hostile_job(pool: LocalPool, hostile: dict[str, JobResult]) -> None:
    assert len(hostile) == len(HOSTILE_JUDGE_JOBS)  # all answered before this good job starts
    assert_still_judges(pool)
    left = {p.name for p in Path("/sys/fs/cgroup/pids").glob("cuda-agent-*")}
    assert not {f"cuda-agent-{job.id[:24]}" for job in HOSTILE_JUDGE_JOBS.values()} & left  # no process left behind


def test_network_is_unreachable(pool: LocalPool, folder: Path) -> None:
    probe = "import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=5)"
    result = pool.run(CommandJob(argv=["python", "-c", probe], cwd=str(folder), timeout_s=30))
    if not result.hardening["network_isolated"]:
        pytest.skip(f"no network namespace here: {result.hardening['warnings']}")
    assert result.command.exit_code == 1
    assert "Network is unreachable" in result.command.stderr


def test_protected_file_change_is_restored_and_reported(pool: LocalPool, folder: Path) -> None:
    (folder / "utils").mkdir()
    (folder / "utils" / "verification.py").write_text("print('real check')\n")
    (folder / "model_new.py").write_text("# editable\n")
    script = "echo 'print(\"PASS\")' > utils/verification.py; echo edited >> model_new.py; true"
    job = CommandJob(argv=["bash", "-c", script], cwd=str(folder), timeout_s=10, protected=["utils"])
    result = pool.run(job)
    assert (folder / "utils" / "verification.py").read_text() == "print('real check')\n"
    assert (folder / "model_new.py").read_text() == "# editable\nedited\n"
    if result.hardening.get("user"):
        assert "Permission denied" in result.command.stderr  # dropped user: the write itself failed
    else:
        assert result.command.tampered == ["utils/verification.py"]  # root: written, then put back


@pytest.mark.parametrize("path", ["../../etc", "/etc/passwd", "utils/../../x", ""])
def test_protected_paths_must_stay_inside_the_folder(folder: Path, path: str) -> None:
    with pytest.raises(ValidationError, match="must be relative and stay inside cwd"):
        CommandJob(argv=["true"], cwd=str(folder), protected=[path])


def test_a_protected_path_that_is_a_link_is_not_followed(pool: LocalPool, folder: Path) -> None:
    outside = folder / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not the workspace's\n")
    (outside / "secret.txt").chmod(0o644)
    ws = folder / "ws"
    ws.mkdir()
    (ws / "utils").symlink_to(outside)
    pool.run(CommandJob(argv=["true"], cwd=str(ws), timeout_s=10, protected=["utils"]))
    assert (outside / "secret.txt").stat().st_mode & 0o777 == 0o644  # root never chmodded through the link


def test_a_protected_folder_swapped_for_a_link_is_restored_inside_the_folder(pool: LocalPool, folder: Path) -> None:
    outside = folder / "outside"
    outside.mkdir()
    ws = folder / "ws"
    (ws / "utils").mkdir(parents=True)
    (ws / "utils" / "verification.py").write_text("print('real check')\n")
    swap = f"mv utils gone && ln -s {outside} utils"
    result = pool.run(CommandJob(argv=["bash", "-c", swap], cwd=str(ws), timeout_s=10, protected=["utils"]))
    assert result.command.exit_code == 0 and result.command.tampered == ["utils/verification.py"]
    assert list(outside.iterdir()) == []  # root wrote nothing where the link pointed
    assert not (ws / "utils").is_symlink() and (ws / "utils" / "verification.py").read_text() == "print('real check')\n"
