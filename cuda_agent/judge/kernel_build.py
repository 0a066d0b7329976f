"""A workspace's kernels/ compiled as the candidate: whatever the compiler reads (an `#include` of any path, an
assembler's `.incbin`), it reads with the candidate's rights, and its errors quote nothing the candidate could not
read itself.

The build runs as a single file's `load_inline` build does (confine.py): the candidate's user, in namespaces of its
own, on a private copy of the folder built (mounted at its path), the shared caches hidden; what it wrote is copied
back by us (`keep_build`). The machine's shared ccache is not the candidate's to write (its objects would serve
other candidates' builds), so the build has a ccache of its own in its scratch folder, discarded after, with the
fixed glue's objects behind it read-only (`workspace.build.seed_glue`: compiled by us from the package's files
alone); the candidate's own units compile afresh.

Where the judge is not root, or no user can be had for the candidate, the build runs as ours, as it always did.
"""

from __future__ import annotations

import dataclasses
import os
import pwd
import tempfile
from pathlib import Path

from cuda_agent.judge.confine import candidate_user, confined_env, keep_build, private_copy
from cuda_agent.judge.uids import FRESH, UidLease, leased
from cuda_agent.machine import cache_root
from cuda_agent.workspace.build import (
    BUILD_DIR,
    BuildOutcome,
    build_tree,
    ccache_dir,
    glue_store,
    seed_glue,
    write_ninja,
)

OWN_CACHE = f"{BUILD_DIR}/ccache"
"""A workspace's own compiler cache, relative to it: the compile tool's confined builds only."""


def build_kernels_as(
    user: pwd.struct_passwd | None,
    root: Path,
    device: str,
    timeout_s: float,
    cache_dir: Path,
    keep_cache: bool = False,
) -> BuildOutcome:
    """`build_tree(root, device)` as `user` (None: as ours), confined; `cache_dir` is the judge's cache, hidden.

    `keep_cache`: the build's own ccache lives in `root` (OWN_CACHE), kept for the folder's next build (the
    compile tool's, in the candidate's own workspace); else it goes with the build (a judgement's)."""
    if user is None:
        return build_tree(root, device, timeout_s)
    root = root.resolve()
    seed_glue(device, timeout_s)  # ours to write; a glue that failed is compiled by the build itself
    write_ninja(root, device)  # before the copy: the candidate's copy is the one ninja reads
    with tempfile.TemporaryDirectory(prefix="cuda-agent-confined-kernels-") as tmp:
        scratch = Path(tmp)
        own = scratch / "own"  # its home, temporary files and ccache: bound writable in its namespace, as the copy
        (own / "ccache").mkdir(parents=True)
        confinement = private_copy(root, scratch, user, cache_dir)  # scratch (`own` with it) now the user's
        hidden = dict.fromkeys([*confinement.hidden, str(cache_root()), str(ccache_dir())])
        confinement = dataclasses.replace(
            confinement,
            binds=(*confinement.binds, (str(own), str(own))),  # the copy stays first: keep_build reads it
            reach=(*confinement.reach, str(glue_store())),
            hidden=tuple(hidden),
            shown=(*confinement.shown, str(glue_store())),
        )
        ccache = root / OWN_CACHE if keep_cache else own / "ccache"
        env = confined_env({"PYTHONPATH": os.environ.get("PYTHONPATH", "")}, str(own)) | {
            "CCACHE_DIR": str(ccache),
            "CCACHE_REMOTE_STORAGE": f"file:{glue_store()}|read-only",
        }
        outcome = build_tree(root, device, timeout_s, ccache, env=env, confine=confinement)
        keep_build(confinement, root)
    return outcome


def compile_workspace(root: Path, device: str, timeout_s: float = 600.0) -> BuildOutcome:
    """The workspace's compile tool (`bash utils/compile.sh`): its kernels built as a user id leased for the build
    where the tool runs as root (a pool that drops no one), else as whoever runs it."""
    cache_dir = cache_root()
    user, _ = candidate_user(FRESH, cache_dir)
    if user is None or not leased(user.pw_uid):
        return build_kernels_as(user, root, device, timeout_s, cache_dir, keep_cache=True)
    lease = UidLease.claim()
    try:
        return build_kernels_as(lease.user, root, device, timeout_s, cache_dir, keep_cache=True)
    finally:
        lease.release()
