"""Candidate code under another user, on a private copy of its build folder (judge/confine.py)."""

from __future__ import annotations

import os
import pwd
import sys
import tempfile
import time
from pathlib import Path

import pytest

from cuda_agent.gpu_turns import turns_for
from cuda_agent.judge import JudgeConfig, judge
from cuda_agent.judge.build import OK_MARKER
from cuda_agent.judge.confine import candidate_user, mounts_work, private_copy
from cuda_agent.judge.uids import leased
from cuda_agent.subproc import Confinement, child_env, interpreter_paths, run_command
from cuda_agent.tasks import Catalog

from .helpers import example_solution

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not mounts_work(), reason="needs root and PID and mount namespaces (unshare)"
)


@needs_root
def test_a_confined_child_sees_its_copy_at_the_shared_path_and_runs_as_the_user() -> None:
    with tempfile.TemporaryDirectory() as tmp:  # pytest's tmp_path is out of nobody's reach
        Path(tmp).chmod(0o755)
        _confined_child(Path(tmp))


@needs_root
def test_a_confined_candidate_sees_no_gpu_turns_to_take_or_replace() -> None:
    # A candidate holding a turn's lock (in a process it left behind) would keep every judgement off the GPU.
    with tempfile.TemporaryDirectory() as tmp:
        cache, ext = Path(tmp, "cache"), Path(tmp, "cache", "ext")
        ext.mkdir(parents=True)
        for folder in (Path(tmp), cache, ext):
            folder.chmod(0o755)
        turns = turns_for(cache, "GPU-ffff")
        with turns.exclusive():
            pass
        scratch = Path(tmp, "scratch")
        scratch.mkdir()
        confinement = private_copy(ext, scratch, pwd.getpwnam("nobody"), cache)
        argv = ["sh", "-c", f"ls -A {turns.folder.parent}; touch {turns.folder.parent}/GPU-ffff/gate"]
        child = run_command(argv, 20, confine=confinement)
        assert child.stdout == "" and "No such file" in child.stderr
        assert sorted(p.name for p in turns.folder.iterdir()) == ["gate", "gpu"]


def _confined_child(tmp_path: Path) -> None:
    shared, private = tmp_path / "shared", tmp_path / "private"
    shared.mkdir()
    private.mkdir()
    (shared / "f").write_text("shared\n")
    (private / "f").write_text("private\n")
    nobody = pwd.getpwnam("nobody")
    argv = ["sh", "-c", f"cat {shared}/f; id -u; echo x > {shared}/written"]
    child = run_command(argv, 20, confine=Confinement(user=nobody, binds=((str(private), str(shared)),)))
    assert child.stdout.split()[:2] == ["private", str(nobody.pw_uid)]
    assert "Permission denied" in child.stderr  # the copy is still root's: nobody writes nothing
    assert (shared / "f").read_text() == "shared\n" and not (shared / "written").exists()


@needs_root
def test_a_confined_candidate_has_the_machines_shared_folders_to_itself() -> None:
    # Round 12: a candidate moved a root-owned socket out of a folder of mode 0777 under /tmp (Ray keeps its sockets
    # and unpacked packages in such folders) and left a note in /run/lock, which the id's sweep does not cover.
    # Its own folder, under /tmp here as on most machines, is still there, and what it writes there stays.
    nobody = pwd.getpwnam("nobody")
    with tempfile.TemporaryDirectory() as service, tempfile.TemporaryDirectory() as own:
        Path(service).chmod(0o777)
        Path(service, "sock").write_text("the service's\n")
        Path(own).chmod(0o777)
        note = f"/run/lock/cuda-agent-test-{Path(own).name}"
        script = (
            f"ls {service}; mv {service}/sock {service}/moved; echo x > {note}; echo x > /tmp/left-{Path(own).name}; "
            "echo mine > here; cat here"
        )
        child = run_command(["sh", "-c", script], 20, cwd=Path(own), confine=Confinement(user=nobody))
        assert child.stdout.split() == ["mine"], (child.stdout, child.stderr)
        assert Path(service, "sock").read_text() == "the service's\n" and not Path(service, "moved").exists()
        assert not Path(note).exists() and not Path(f"/tmp/left-{Path(own).name}").exists()
        assert Path(own, "here").read_text() == "mine\n"


@needs_root
@pytest.mark.slow
def test_judge_builds_and_runs_the_candidate_on_private_copies(tmp_path: Path) -> None:
    task = Catalog().resolve("examples/relu")
    solution = tmp_path / "solution.py"
    solution.write_text(example_solution("relu"))
    # Judged afresh both times: the second judgement must run again on the cached build, not be answered
    # from the verdict cache.
    config = JudgeConfig(device="cpu", time=False, cache_dir=tmp_path / "cache", verdict_cache=False)

    first = judge(task, solution, config)
    assert first.verdict == "pass" and first.env["candidate_user"] == "a user id of its own", first.message
    (ext_dir,) = (tmp_path / "cache" / "builds").iterdir()
    assert (ext_dir / OK_MARKER).exists() and list(ext_dir.rglob("*.so"))  # the build came back to the cache
    before = {p: p.stat().st_mtime_ns for p in [ext_dir, *ext_dir.rglob("*")]}

    again = judge(task, solution, config)
    assert again.verdict == "pass" and again.env["build_cached"]
    # The candidate's process found the build done: its cache lies under a folder closed to others (pytest's, as
    # root's own default under /root), and the fast-build objects the build used are shown to it there.
    assert tmp_path.parent.stat().st_mode & 0o001 == 0
    assert "run_stage_built" not in again.env and again.stage_s["run.import"] < 10, again.env.get("run_stage_built")
    after = {p: p.stat().st_mtime_ns for p in [ext_dir, *ext_dir.rglob("*")]}
    assert after == before  # torch's loader and ninja wrote into the private copy, not the cache


def test_the_verdict_says_whether_the_candidate_was_isolated(tmp_path: Path) -> None:
    user, why_not = candidate_user("nobody", tmp_path / "cache")
    if os.geteuid() != 0:
        assert user is None and why_not.startswith("not isolated: the judge runs as")
    elif mounts_work():
        assert user is not None and user.pw_name == "nobody" and why_not is None
    else:
        assert user is None and "no private PID and mount namespace" in why_not
    fresh, why_not = candidate_user("fresh", tmp_path / "cache")  # the default: an id per judgement, leased later
    assert (fresh is not None and leased(fresh.pw_uid)) == (user is not None), why_not
    if os.geteuid() == 0:
        assert candidate_user("no-such-user-here", tmp_path) == (
            None,
            "stayed root: no user 'no-such-user-here' on this machine",
        )


def test_a_cache_folder_not_made_yet_is_made_and_probed(tmp_path: Path) -> None:
    # A fresh machine: the probe ran before the judge had made its cache, and crashed the sandbox runner.
    cache = tmp_path / "not" / "yet"
    user, why_not = candidate_user("nobody", cache)
    if os.geteuid() == 0:
        assert cache.is_dir()
        assert user is not None or why_not.startswith("stayed root")


def _can_drop() -> bool:
    return os.geteuid() == 0 and candidate_user("nobody", JudgeConfig().cache_dir)[0] is not None


@pytest.mark.skipif(not _can_drop(), reason="needs root, and an interpreter and packages that nobody can reach")
@pytest.mark.slow
def test_a_candidate_that_slips_past_the_policy_cannot_write_the_shared_cache(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    (cache / "baselines").mkdir(parents=True)
    cache.chmod(0o755)
    (cache / "baselines").chmod(0o755)
    for parent in tmp_path.parents:  # pytest's folders are root's alone; nobody must reach the cache to try
        if parent == Path("/tmp"):
            break
        parent.chmod(parent.stat().st_mode | 0o005)
    tmp_path.chmod(0o755)
    planted = cache / "baselines" / "planted.json"
    source = example_solution("relu").replace(
        "class ModelNew", f"open({str(planted)!r}, 'w').write('{{}}')\n\n\nclass ModelNew", 1
    )
    solution = tmp_path / "solution.py"
    solution.write_text(source)
    config = JudgeConfig(device="cpu", time=False, cache_dir=cache, candidate_user="nobody", static_policy=False)
    verdict = judge(Catalog().resolve("examples/relu"), solution, config)
    assert verdict.env["candidate_user"] == "nobody"
    # The cache is not even there for it: an empty folder stands in its place.
    assert verdict.verdict == "runtime_error" and "FileNotFoundError" in verdict.message, verdict.message
    assert not planted.exists()


@needs_root
def test_nothing_a_confined_child_starts_outlives_it() -> None:
    # A daemon that leaves the process group (setsid, double fork) would escape a kill of the group alone.
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp).chmod(0o777)
        daemon = (
            "import os, time\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            f"        open('{tmp}/started', 'w').close()\n"
            "        time.sleep(2)\n"
            f"        open('{tmp}/late', 'w').close()\n"
            "    os._exit(0)\n"
            f"while not os.path.exists('{tmp}/started'): time.sleep(0.01)\n"
            "print(os.getpid(), os.getppid())\n"
        )
        confine = Confinement(user=pwd.getpwnam("nobody"), reach=interpreter_paths())
        # Its folder, where it leaves its marks: below /tmp, whose rest it does not see (its own /tmp, jail.py).
        child = run_command([sys.executable, "-c", daemon], 60, cwd=Path(tmp), env=child_env(), confine=confine)
        assert child.returncode == 0 and child.stdout.split() == ["2", "1"], child.stderr  # PID 1 is ours
        time.sleep(3)
        assert Path(tmp, "started").exists() and not Path(tmp, "late").exists()


@needs_root
def test_a_confined_child_ends_as_its_program_did() -> None:
    confine = Confinement(user=pwd.getpwnam("nobody"), reach=interpreter_paths())
    ends = {"import sys; sys.exit(7)": 7, "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)": -11}
    for code, returncode in ends.items():
        assert run_command([sys.executable, "-c", code], 60, env=child_env(), confine=confine).returncode == returncode
    hung = run_command([sys.executable, "-c", "import time; time.sleep(60)"], 1, env=child_env(), confine=confine)
    assert hung.timed_out and hung.wall_s < 10
    # It starts with no signal ignored, as an unconfined child does (the holder ignores some; Python, SIGPIPE).
    ignored = run_command(["grep", "SigIgn", "/proc/self/status"], 20, confine=confine)
    assert ignored.stdout.split() == ["SigIgn:", "0000000000000000"], ignored.stderr


@needs_root
def test_a_folder_closed_to_others_shows_only_what_the_child_needs() -> None:
    # A venv under /root (mode 0700): the interpreter's paths are bound back under a tmpfs over /root, alone.
    with tempfile.TemporaryDirectory() as tmp:
        needed, private = Path(tmp, "env", "lib"), Path(tmp, "secret")
        needed.mkdir(parents=True)
        private.mkdir()
        (needed / "module.py").write_text("print('imported')\n")
        (private / "key").write_text("root's\n")
        assert oct(Path(tmp).stat().st_mode & 0o777) == "0o700"
        confine = Confinement(user=pwd.getpwnam("nobody"), reach=(*interpreter_paths(), str(needed)))
        code = f"import sys, os; sys.path.insert(0, {str(needed)!r}); import module; print(os.listdir({tmp!r}))"
        child = run_command([sys.executable, "-c", code], 60, env=child_env(), confine=confine)
        assert child.stdout.split("\n")[:2] == ["imported", "['env']"], child.stderr
        write = f"open({str(needed / 'planted')!r}, 'w')"
        child = run_command([sys.executable, "-c", write], 60, env=child_env(), confine=confine)
        assert "Read-only file system" in child.stderr and not (needed / "planted").exists()
        assert oct(Path(tmp).stat().st_mode & 0o777) == "0o700"  # outside, nothing changed


@needs_root
def test_a_child_confined_without_a_pid_namespace_keeps_the_machines_process_ids() -> None:
    # For CUDA's legacy IPC, which does not open handles across PID namespaces: mounts and user alone.
    confine = Confinement(user=pwd.getpwnam("nobody"), reach=interpreter_paths(), pid_namespace=False)
    child = run_command(["sh", "-c", "echo $$ $PPID; id -u"], 20, confine=confine)
    pid, parent, uid = child.stdout.split()
    assert int(pid) > 2 and int(parent) > 1 and uid == str(pwd.getpwnam("nobody").pw_uid), child.stderr


def test_the_cli_warns_once_where_the_candidate_is_not_isolated(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As root, the namespaces refused (a container without the capability); not root, the judge's own user.
    from cuda_agent.cli import main
    from cuda_agent.judge import confine

    monkeypatch.setattr(confine, "mounts_work", lambda: False)
    path = tmp_path / "s.py"
    path.write_text("class ModelNew(:\n")  # refused before it runs: the warning comes with every verdict
    assert main(["judge", "examples/relu", str(path), "--device", "cpu", "--json", "--no-verdict-cache"]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: ")]
    expected = "stayed root: no private PID and mount namespace" if os.geteuid() == 0 else "not isolated: the judge"
    assert len(warnings) == 1 and expected in warnings[0], warnings
