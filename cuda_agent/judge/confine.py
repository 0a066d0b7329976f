"""Candidate code in a judgement (its import, its load_inline build, its run) under an unprivileged user, in a PID
and mount namespace of its own (jail.py), whenever the judge runs as root.

The judge itself stays root: it writes the shared build, baseline and verdict caches. The children that execute
the candidate's Python drop to `JudgeConfig.candidate_user` ("nobody"), in namespaces where:
- the interpreter, the virtual environment and our packages are reachable, read-only, even where they live under
  a folder closed to others (a venv under /root, mode 0700): only those paths show there, nothing else of it;
- the cache folder is an empty folder: no cached baseline to rewrite (and so inflate its speedup), no verdict,
  no other candidate's build, no GPU turn to lock; the fast-build objects it reads are bound back read-only;
- its own build folder is a private copy, owned by it, mounted at the shared folder's path (torch's extension
  loader writes into the build folder even to load a finished build: its lock file, ninja's log), so ninja finds
  nothing to do; after a build, what the child wrote is copied back into the cache by us;
- whatever it starts dies with it: the namespace's PID 1 is ours, and ends with the candidate's process or with
  its process group.

Where this cannot work (not root, no such user, no namespaces, an interpreter the user cannot start even so),
candidate code runs as ours and the verdict's env says why (`candidate_isolation`).
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

from cuda_agent.judge.uids import FIRST_UID, FRESH, lock_folder
from cuda_agent.machine import torch_versions
from cuda_agent.subproc import JAIL, Confinement, account, child_env, interpreter_paths, run_command


def candidate_user(name: str | None, cache_dir: Path) -> tuple[pwd.struct_passwd | None, str | None]:
    """The user to run candidate code as, or None and why not (None, None: not asked for).

    `name` "fresh" (uids.FRESH): the account of the range's first id, standing for any id a judgement leases
    (uids.py); they are alike to the machine, which knows none of them. Where the machine refuses that id (a
    container that maps fewer ids), `nobody` stands in, and the reason is given with it."""
    if name is None:
        return None, None
    if os.geteuid() != 0:
        me = pwd.getpwuid(os.geteuid()).pw_name
        return None, (
            f"not isolated: the judge runs as {me}, not root, so the candidate runs as {me} too, with no namespace "
            "of its own: it can write whatever you can (the caches included), and what it starts may outlive it"
        )
    if name == FRESH:
        try:
            lock_folder()
        except OSError as exc:  # no id can be leased here: the shared account still keeps the candidate off ours
            fallback, why_not = candidate_user("nobody", cache_dir)
            return fallback, f"no user id of its own ({exc}); nobody instead" if fallback is not None else why_not
        user, why_not = candidate_user_of(account(FIRST_UID), cache_dir)
        if user is None and why_not and "cannot start" in why_not:
            fallback, _ = candidate_user("nobody", cache_dir)
            return fallback, f"{why_not}; nobody instead" if fallback is not None else why_not
        return user, why_not
    try:
        user = pwd.getpwnam(name)
    except KeyError:
        return None, f"stayed root: no user {name!r} on this machine"
    return candidate_user_of(user, cache_dir)


def candidate_user_of(user: pwd.struct_passwd, cache_dir: Path) -> tuple[pwd.struct_passwd | None, str | None]:
    """`user`, where namespaces work and it can start our interpreter; else None and why not."""
    if not mounts_work():
        return None, "stayed root: no private PID and mount namespace here (unshare/mount refused)"
    # A fresh machine has no cache yet; the judge makes it anyway, so make it now (the probe's record lives there).
    cache_dir.mkdir(parents=True, exist_ok=True)
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

    jail = hashlib.sha256(JAIL.read_bytes()).hexdigest()  # a changed jail is probed again
    setup = (
        f"{jail}|{user.pw_uid}|{sys.executable}|{sys.path}|{os.environ.get('PYTHONPATH')}|{torch_versions()['torch']}"
    )
    record = cache_dir / "confine" / f"{hashlib.sha256(setup.encode()).hexdigest()[:20]}.json"
    if record.exists():
        return json.loads(record.read_text())["why_not"]
    argv = [sys.executable, "-P", "-c", "import torch, pydantic, cuda_agent.judge.child.shim"]
    env = confined_env(child_env(), "/")
    child = run_command(argv, 300, cwd=Path("/"), env=env, confine=Confinement(user=user, reach=interpreter_paths()))
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
    """Whether a child can get a PID and mount namespace with a bind mount, as the judge will ask (probed once)."""
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
    confinement that runs as `user`, hides `cache_dir` (but its fast-build objects) and mounts the copy over
    `ext_dir`."""
    copy = scratch / "ext"
    shutil.copytree(ext_dir, copy, symlinks=True, dirs_exist_ok=True)
    hand_over(scratch, user)
    return Confinement(
        user=user,
        binds=((str(copy), str(ext_dir)),),
        # The cache reachable first (it may lie under a closed folder), then hidden but its fast-build objects.
        reach=(*interpreter_paths(), str(cache_dir)),
        hidden=(str(cache_dir),),
        shown=(str(cache_dir / "fast"),),
    )


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
