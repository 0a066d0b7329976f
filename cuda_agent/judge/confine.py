"""Candidate code in a judgement (its import, its load_inline build, its run) under an unprivileged user.

The judge itself stays root when the pool runs as root: it writes the shared build and baseline
caches. The children that execute the candidate's Python drop to `JudgeConfig.candidate_user`, so a
candidate can neither rewrite a cached baseline (and inflate its own speedup) nor another
candidate's build. Torch's extension loader writes into the build folder even to load a finished
build (its lock file, ninja's log), so each such child gets a private copy of its build folder,
mounted at the shared folder's path in a mount namespace of its own: the same paths, so ninja
finds nothing to do. After a build, what the child wrote is copied back into the cache by us. The same
namespace shows an empty folder in place of the machine's GPU turns (gpu_turns.py), which the candidate
could otherwise lock for good from a process it leaves behind.

Where this cannot work (not root, no such user, the interpreter or packages out of the user's
reach, no mount namespaces), candidate code runs as ours and the verdict's env says why.
"""

from __future__ import annotations

import functools
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from cuda_agent.gpu_turns import turns_root
from cuda_agent.machine import torch_versions
from cuda_agent.subproc import Confinement, child_env, run_command, unprivileged_user


def candidate_user(name: str | None, cache_dir: Path) -> tuple[pwd.struct_passwd | None, str | None]:
    """The user to run candidate code as, or None and why not (None, None: not asked for, or not root)."""
    import importlib.util

    import cuda_agent

    torch_dir = Path(importlib.util.find_spec("torch").origin).parent  # found, not imported: torch costs seconds

    # The cache too: its build folders are where the candidate's private copies are mounted. A fresh machine
    # has none yet; the judge makes it anyway, so make it now and probe the folder it will be.
    cache_dir.mkdir(parents=True, exist_ok=True)
    needed = [Path(sys.executable), torch_dir, Path(cuda_agent.__file__).parent, cache_dir]
    needed += [Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).exists()]
    user, why_not = unprivileged_user(name, needed)
    if user is None:
        return None, why_not
    if not mounts_work():
        return None, "stayed root: no private mount namespace here (unshare/mount refused)"
    why_not = _interpreter_refuses(user, cache_dir)
    return (None, why_not) if why_not else (user, None)


def confined_env(env: dict[str, str], home: str) -> dict[str, str]:
    """`env` for a confined child: HOME and TMPDIR in `home` (a folder the user owns), and our
    site-packages on PYTHONPATH, since an interpreter started by another user may not find them by
    itself (one copied from pyenv found Debian's dist-packages instead)."""
    import site

    extra = [p for p in site.getsitepackages() if Path(p).is_dir()]
    path = os.pathsep.join([*filter(None, env.get("PYTHONPATH", "").split(os.pathsep)), *extra])
    return env | {"PYTHONPATH": path, "HOME": home, "TMPDIR": home}


def _interpreter_refuses(user: pwd.struct_passwd, cache_dir: Path) -> str | None:
    """Why `user` cannot import the judge's worker with our interpreter, or None; tried once per setup."""
    import hashlib
    import json

    setup = f"{user.pw_uid}|{sys.executable}|{sys.path}|{os.environ.get('PYTHONPATH')}|{torch_versions()['torch']}"
    record = cache_dir / "confine" / f"{hashlib.sha256(setup.encode()).hexdigest()[:20]}.json"
    if record.exists():
        return json.loads(record.read_text())["why_not"]
    argv = [sys.executable, "-P", "-c", "import torch, pydantic, cuda_agent.judge.child.shim"]
    env = confined_env(child_env(), "/")
    child = run_command(argv, 300, cwd=Path("/"), env=env, confine=Confinement(user=user))
    why_not = None
    if child.returncode != 0:
        last = (child.stderr.strip().splitlines() or ["(no output)"])[-1]
        why_not = f"stayed root: {user.pw_name} cannot start the judge's worker with {sys.executable}: {last}"
    record.parent.mkdir(parents=True, exist_ok=True)
    partial = record.with_name(f".{record.name}.{os.getpid()}")
    partial.write_text(json.dumps({"why_not": why_not}))
    os.replace(partial, record)
    return why_not


@functools.cache
def mounts_work() -> bool:
    """Whether a child can get a mount namespace with a bind mount, as the judge will ask (probed once)."""
    with tempfile.TemporaryDirectory() as tmp:
        source, target = Path(tmp, "a"), Path(tmp, "b")
        source.mkdir()
        target.mkdir()
        (source / "seen").touch()
        try:
            probe = run_command(["ls", str(target)], 20, confine=Confinement(binds=((str(source), str(target)),)))
        except (OSError, subprocess.SubprocessError):
            return False
        return probe.returncode == 0 and probe.stdout.split() == ["seen"]


def hand_over(folder: Path, user: pwd.struct_passwd) -> None:
    """Give `folder` and everything below it to `user` (links are left as they are)."""
    for path in [folder, *folder.rglob("*")]:
        os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)


def private_copy(ext_dir: Path, scratch: Path, user: pwd.struct_passwd, cache_dir: Path) -> Confinement:
    """Copy `ext_dir` under `scratch` (times kept, so ninja sees an up-to-date build) for `user`; the
    confinement that mounts the copy over `ext_dir`, an empty folder over `cache_dir`'s GPU turns (the user
    could otherwise lock every judgement on the machine out of its GPU), and drops to `user`."""
    copy, no_turns = scratch / "ext", scratch / "no-gpu-turns"
    shutil.copytree(ext_dir, copy, symlinks=True, dirs_exist_ok=True)
    no_turns.mkdir()
    hand_over(scratch, user)
    turns = turns_root(cache_dir)
    turns.mkdir(mode=0o755, parents=True, exist_ok=True)  # made now: one made while the candidate runs would show
    return Confinement(user=user, binds=((str(copy), str(ext_dir)), (str(no_turns), str(turns))))


def keep_build(confinement: Confinement, ext_dir: Path) -> None:
    """Copy what a confined build wrote into its private copy back into the shared `ext_dir`, as ours.

    Links and special files are left out: the cache keeps regular files and folders only.
    """
    copy = Path(confinement.binds[0][0])
    for path in sorted(copy.rglob("*")):
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            continue
        target = ext_dir / path.relative_to(copy)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif not target.exists() or target.stat().st_mtime_ns != path.stat().st_mtime_ns:
            # Whole files only: a judgement of the same build that copies the folder meanwhile sees the
            # old file or the new one, never half of one.
            partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
            shutil.copy2(path, partial)
            os.replace(partial, target)
