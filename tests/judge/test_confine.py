"""Candidate code under another user, on a private copy of its build folder (judge/confine.py)."""

from __future__ import annotations

import os
import pwd
import tempfile
from pathlib import Path

import pytest

from cuda_agent.gpu_turns import turns_for
from cuda_agent.judge import JudgeConfig, judge
from cuda_agent.judge import pipeline as pipeline_mod
from cuda_agent.judge.build import OK_MARKER
from cuda_agent.judge.confine import mounts_work, private_copy
from cuda_agent.subproc import Confinement, run_command
from cuda_agent.tasks import Catalog

from .helpers import example_solution

needs_root = pytest.mark.skipif(os.geteuid() != 0 or not mounts_work(), reason="needs root and mount namespaces")


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
def test_judge_builds_and_runs_the_candidate_on_private_copies(tmp_path: Path, monkeypatch) -> None:
    # Dropping to nobody needs an interpreter nobody can reach (not /root/.pyenv); stand root in for it,
    # so that the copies, mounts and copy-back run as they do for nobody.
    monkeypatch.setattr(pipeline_mod, "candidate_user", lambda name, cache_dir: (pwd.getpwuid(0), None))
    task = Catalog().resolve("examples/relu")
    solution = tmp_path / "solution.py"
    solution.write_text(example_solution("relu"))
    # Judged afresh both times: the second judgement must run again on the cached build, not be answered
    # from the verdict cache.
    config = JudgeConfig(
        device="cpu", time=False, cache_dir=tmp_path / "cache", candidate_user="nobody", verdict_cache=False
    )

    first = judge(task, solution, config)
    assert first.verdict == "pass" and first.env["candidate_user"] == "root", first.message
    (ext_dir,) = (tmp_path / "cache" / "builds").iterdir()
    assert (ext_dir / OK_MARKER).exists() and list(ext_dir.rglob("*.so"))  # the build came back to the cache
    before = {p: p.stat().st_mtime_ns for p in [ext_dir, *ext_dir.rglob("*")]}

    again = judge(task, solution, config)
    assert again.verdict == "pass" and again.env["build_cached"]
    after = {p: p.stat().st_mtime_ns for p in [ext_dir, *ext_dir.rglob("*")]}
    assert after == before  # torch's loader and ninja wrote into the private copy, not the cache


def test_without_a_reachable_user_the_verdict_says_why(tmp_path: Path) -> None:
    task = Catalog().resolve("examples/relu")
    solution = tmp_path / "solution.py"
    solution.write_text(example_solution("relu"))
    verdict = judge(task, solution, JudgeConfig(device="cpu", time=False, candidate_user="nobody"))
    assert verdict.verdict == "pass"
    if os.geteuid() != 0:
        assert "candidate_user" not in verdict.env and "candidate_isolation" not in verdict.env  # nothing to drop
    else:
        assert verdict.env.get("candidate_user") == "nobody" or "stayed root" in verdict.env["candidate_isolation"]


def test_a_cache_folder_not_made_yet_is_made_and_probed(tmp_path: Path) -> None:
    # A fresh machine: the probe ran before the judge had made its cache, and crashed the sandbox runner.
    from cuda_agent.judge.confine import candidate_user

    cache = tmp_path / "not" / "yet"
    user, why_not = candidate_user("nobody", cache)
    assert cache.is_dir()
    if os.geteuid() == 0:
        assert user is not None or why_not.startswith("stayed root")


def _can_drop() -> bool:
    from cuda_agent.judge.confine import candidate_user

    return os.geteuid() == 0 and candidate_user("nobody", JudgeConfig().cache_dir)[0] is not None


@pytest.mark.skipif(not _can_drop(), reason="needs root, and an interpreter and packages that nobody can reach")
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
