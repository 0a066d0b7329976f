"""Workspace commands run as root: who they run as, why, and who owns the workspace afterwards."""

from __future__ import annotations

import os
import pwd
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_agent.sandbox import CommandJob, LocalPool, execution
from cuda_agent.sandbox.execution import hand_over, restore_owners
from cuda_agent.subproc import first_blocked_dir

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only root hands commands to nobody")
VENV_BIN = str(Path(sys.executable).parent)


@pytest.fixture(scope="module")
def pool() -> Iterator[LocalPool]:
    with LocalPool(build_workers=1) as pool:
        yield pool


@pytest.fixture
def workspace() -> Iterator[Path]:
    # Directly under /tmp (pytest's own folder is root-only): a folder nobody can reach, as a real workspace is.
    root = Path(tempfile.mkdtemp(prefix="cuda-agent-ws-", dir="/tmp"))
    root.chmod(0o755)
    (root / "kernels").mkdir()
    (root / "kernels" / "k.cu").write_text("// kernel\n")
    yield root
    shutil.rmtree(root)


def owners(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.lstat().st_uid, p.lstat().st_gid) for p in [root, *root.rglob("*")]}


def test_command_runs_as_nobody_and_leaves_ownership_as_it_was(pool: LocalPool, workspace: Path) -> None:
    before = owners(workspace)
    job = CommandJob(
        argv=["bash", "-c", "id -un; touch kernels/new.o"], cwd=str(workspace), env={"PATH": "/usr/bin:/bin"}
    )
    result = pool.run(job).command
    assert result.exit_code == 0 and result.stdout == "nobody\n" and result.user == "nobody"
    after = owners(workspace)
    assert {k: v for k, v in after.items() if k in before} == before  # nothing was left to nobody
    assert after["kernels/new.o"] == before["."]  # what it made belongs to the workspace's owner


def test_hand_over_records_every_owner_and_gives_all_but_the_protected_paths_in_one_walk(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nobody = pwd.getpwnam("nobody")
    (workspace / "utils").mkdir()
    (workspace / "utils" / "verification.py").write_text("# protected\n")
    (workspace / "model.py").write_text("# protected\n")
    outside = workspace.parent / f"{workspace.name}-outside"
    outside.write_text("not the workspace's\n")
    (workspace / "kernels" / "link").symlink_to(outside)
    before = owners(workspace)
    walks = []
    walk = execution.walk
    monkeypatch.setattr(execution, "walk", lambda root: walks.append(root) or walk(root))
    try:
        recorded: dict[Path, tuple[int, int]] = {}
        hand_over(workspace, ["utils", "model.py"], nobody, recorded)
    finally:
        monkeypatch.undo()
    assert walks == [workspace]
    assert {str(p.relative_to(workspace)): owner for p, owner in recorded.items()} == before
    after = owners(workspace)
    given = {k for k, v in after.items() if v == (nobody.pw_uid, nobody.pw_gid)}
    assert given == {".", "kernels", "kernels/k.cu", "kernels/link"}  # the link itself, not what it names
    assert outside.stat().st_uid == 0
    restore_owners(workspace, recorded)
    assert owners(workspace) == before
    outside.unlink()


def test_a_hand_over_that_fails_part_way_has_recorded_what_it_changed(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nobody = pwd.getpwnam("nobody")
    before = owners(workspace)
    chown = os.chown
    changed = []

    def chown_then_fail(path, uid, gid, follow_symlinks=True):
        if changed:
            raise PermissionError(f"chown {path}")
        changed.append(path)
        chown(path, uid, gid, follow_symlinks=follow_symlinks)

    monkeypatch.setattr(os, "chown", chown_then_fail)
    recorded: dict[Path, tuple[int, int]] = {}
    with pytest.raises(PermissionError):
        hand_over(workspace, [], nobody, recorded)
    monkeypatch.undo()
    assert changed and changed[0] in recorded  # the one path that changed hands is recorded
    restore_owners(workspace, recorded)
    assert owners(workspace) == before


@pytest.mark.skipif(first_blocked_dir(Path(sys.executable)) is None, reason="nobody can reach this interpreter")
def test_command_stays_root_and_says_why_when_nobody_cannot_reach_python(pool: LocalPool, workspace: Path) -> None:
    # The case: the service's PATH leads to a Python below /root; as nobody, bash found no `python` (127).
    env = {"PATH": f"{VENV_BIN}:/usr/bin:/bin"}
    job = CommandJob(argv=["bash", "-c", "python -c 'print(6 * 7)'"], cwd=str(workspace), env=env)
    result = pool.run(job).command
    assert (result.exit_code, result.stdout, result.user) == (0, "42\n", None)
    why = " ".join(result.isolation)
    assert "stayed root: nobody cannot reach" in why and "is not world-searchable" in why
    assert owners(workspace)["."] == (0, 0)
