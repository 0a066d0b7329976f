"""What a workspace holds, what the agent may edit, and how tampering with the rest is detected.

```
SKILL.md            the instructions (read-only)
model.py            the reference (read-only)
model_new.py        the agent's model, calling the compiled `cuda_extension`
kernels/            the agent's .cu / .cuh / .cpp / .h files (CPU variant: .cpp / .h)
binding.cpp, binding_registry.h   fixed glue (read-only)
utils/              compile, verification and profiling entry points (read-only)
.cuda_agent/        the task record and the workspace's own build (not for the agent)
```
A Triton workspace (language 'triton') has no kernels/ and no glue: its kernels are `@triton.jit`
functions in model_new.py, and its SKILL.md is `files/SKILL_triton.md`'s text.

Read-only files are never trusted: builds use the package's copies, and `tampered_files`
compares what is on disk with them so that the tools and the judge can reject a change.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
from importlib import resources
from pathlib import Path, PurePosixPath

from cuda_agent.errors import SolutionError
from cuda_agent.types import LANGUAGES, Language, Task

EXTENSION_NAME = "cuda_extension"
"""The Python module the workspace's kernels build into (`import cuda_extension` in model_new.py)."""
STATE_DIR = ".cuda_agent"
"""Per-workspace state: `task.json` and the incremental build folder."""
DEVICES = ("cuda", "cpu")

EDITABLE = ("model_new.py", "kernels/*.cu", "kernels/*.cuh", "kernels/*.cpp", "kernels/*.h", "kernels/*.hpp")
"""Globs (relative to the workspace root) of the files the agent may create, edit and delete."""
KERNEL_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp")
"""Files under kernels/ (at any depth) that the judge reads as the solution's sources."""
FIXED_FILES = ("binding.cpp", "binding_registry.h")
UTILS_FILES = (
    "utils/__init__.py",
    "utils/compile.sh",
    "utils/compile.py",
    "utils/verification.py",
    "utils/profiling.py",
)


def is_editable(relative_path: str) -> bool:
    """Whether the agent may write this path (relative to the workspace root, '/'-separated).

    Example:
        >>> is_editable("kernels/relu.cu"), is_editable("utils/verification.py"), is_editable("kernels/a/b.cu")
        (True, False, False)
    """
    path = PurePosixPath(relative_path)
    if path.is_absolute() or ".." in path.parts:
        return False
    text = path.as_posix()
    return any(fnmatch.fnmatchcase(text, pattern) and text.count("/") == pattern.count("/") for pattern in EDITABLE)


def template_file(name: str) -> str:
    """Text of one file of the package's workspace template (e.g. 'binding.cpp', 'cuda/kernels/...')."""
    return resources.files("cuda_agent.workspace").joinpath("files", name).read_text()


def template_dir() -> Path:
    """The template folder on disk (the build compiles the fixed glue from here, never from a workspace)."""
    return Path(str(resources.files("cuda_agent.workspace").joinpath("files")))


def skill_text(device: str, language: Language = "cuda") -> str:
    """SKILL.md for a device and a kernel language: the language's text with the device's section filled in."""
    text = template_file("SKILL_triton.md" if language == "triton" else "SKILL.md")
    start, end = f"<!-- {device} -->", f"<!-- /{device} -->"
    for other in DEVICES:
        if other != device:
            text = _drop_between(text, f"<!-- {other} -->", f"<!-- /{other} -->")
    return text.replace(start + "\n", "").replace(end + "\n", "")


def _drop_between(text: str, start: str, end: str) -> str:
    while start in text:
        i = text.index(start)
        j = text.index(end, i) + len(end) + 1
        text = text[:i] + text[j:]
    return text


def protected_copies(task: Task, device: str, language: Language = "cuda") -> dict[str, str]:
    """The expected text of every read-only file of a workspace for this task, device and kernel language."""
    copies = {"SKILL.md": skill_text(device, language), "model.py": task.code}
    for name in (() if language == "triton" else FIXED_FILES) + UTILS_FILES:
        copies[name] = template_file(name)
    return copies


def tampered_files(root: Path, task: Task) -> list[str]:
    """Read-only files of the workspace at `root` that differ from the package's copies.

    A file that is absent is not tampering (a solution folder may carry only model_new.py and
    kernels/); one that is present must match byte for byte. SKILL.md may be any device's and language's.
    """
    changed = []
    for name, expected in protected_copies(task, "cuda").items():
        path = root / name
        if not path.is_file():
            continue
        actual = _digest(path.read_bytes())
        allowed = {_digest(expected.encode())}
        if name == "SKILL.md":
            allowed |= {_digest(skill_text(d, lang).encode()) for d in DEVICES for lang in LANGUAGES}
        if actual not in allowed:
            changed.append(name)
    return changed


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def source_name(file: Path, root: Path) -> str:
    """A kernel source's name in the solution (its path below `root`), which must be text as its content must: a name
    whose bytes are not UTF-8 (Python's surrogate escapes stand for them) cannot be hashed, written to a job's spec or
    compiled by name, so its failure would be ours, a name the agent chose.

    Raises:
        SolutionError: the name is not text.
    """
    name = file.relative_to(root).as_posix()
    try:
        name.encode()
    except UnicodeEncodeError:
        raise SolutionError(f"{ascii(str(file))}: a file name that is not UTF-8 text") from None
    return name


def walk(root: Path) -> tuple[list[Path], OSError | None]:
    """Every path below `root` that a walk reaches, sorted (links listed, never entered, as `Path.rglob` lists them),
    and the first error that kept part of the tree from it (None: it reached all). A tree made deeper than a path may
    be long (a loop of `mkdir d && cd d` does it), or changed as it is walked, stops a walk there: every walk of a
    tree the agent writes goes through here, and its caller decides what that means (once, each raised: a sandbox
    job, the episode and the judge failed as ours)."""
    found: list[Path] = []
    failed: list[OSError] = []
    for folder, dirs, files in os.walk(root, onerror=failed.append):
        found += [Path(folder, name) for name in (*dirs, *files)]
    return sorted(found), (failed[0] if failed else None)
