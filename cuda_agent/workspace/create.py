"""Lay out a workspace for one task: the reference, a `model_new.py` template, a worked example, the
fixed glue and the protected tools; for Triton, the template holds the worked example and there is no glue."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

from cuda_agent.errors import ConfigError
from cuda_agent.types import LANGUAGES, Language, Task
from cuda_agent.workspace.layout import DEVICES, FIXED_FILES, STATE_DIR, UTILS_FILES, skill_text, template_dir

TASK_RECORD = f"{STATE_DIR}/task.json"


def _signature(code: str, method: str) -> str:
    """The parameter list of `Model.<method>` without `self`, as written in the task (defaults kept)."""
    tree = ast.parse(code)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == method:
                    args = item.args
                    args.args = args.args[1:]
                    return ast.unparse(args)
    return "*args" if method == "forward" else ""


def model_new_template(task: Task, device: str) -> str:
    """A `model_new.py` with the reference's signatures and a forward that says what to do."""
    init, forward = _signature(task.code, "__init__"), _signature(task.code, "forward")
    build = "bash utils/compile.sh"
    return f'''"""ModelNew for {task.name}: same constructor and forward as model.py's Model, computed by your kernels.

Kernels live in kernels/ ({"*.cu" if device == "cuda" else "*.cpp"} plus *_binding.cpp registering them);
`{build}` builds them into the `cuda_extension` module imported here.
"""

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self{", " + init if init else ""}):
        super().__init__()
        # Keep any parameters of the reference here, with the same names, shapes and initialisation.

    def forward(self{", " + forward if forward else ""}):
        # Call your kernels, e.g. `return cuda_extension.example_scale(x, 2.0)`.
        raise NotImplementedError("write kernels in kernels/, register them, and call them here")
'''


def triton_template(task: Task) -> str:
    """A Triton `model_new.py`: the reference's signatures, a worked example kernel and a forward that says what to do."""
    init, forward = _signature(task.code, "__init__"), _signature(task.code, "forward")
    return f'''"""ModelNew for {task.name}: same constructor and forward as model.py's Model, computed by your Triton kernels.

Kernels are @triton.jit functions in this file, launched from forward as kernel[grid](...).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def example_scale_kernel(x_ptr, y_ptr, alpha, n, BLOCK: tl.constexpr):
    # A worked example (y = alpha * x): one program per BLOCK elements, the tail masked.
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(y_ptr + offsets, alpha * tl.load(x_ptr + offsets, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self{", " + init if init else ""}):
        super().__init__()
        # Keep any parameters of the reference here, with the same names, shapes and initialisation.

    def forward(self{", " + forward if forward else ""}):
        # Launch your kernels, e.g. y = torch.empty_like(x); n = x.numel()
        # example_scale_kernel[(triton.cdiv(n, 1024),)](x, y, 2.0, n, BLOCK=1024)
        raise NotImplementedError("write @triton.jit kernels in this file and launch them here")
'''


def create_workspace(
    task: Task, root: Path, device: str = "cuda", force: bool = False, language: Language = "cuda"
) -> Path:
    """Write a fresh workspace for `task` at `root`.

    Args:
        task: the problem; its code becomes model.py.
        root: the folder to create (must not exist or be empty, unless `force`).
        device: 'cuda' (CUDA kernels) or 'cpu' (C++ kernels, OpenMP allowed).
        force: replace an existing folder's contents.
        language: 'cuda' (C++/CUDA kernels in kernels/, built into cuda_extension) or 'triton' (`@triton.jit`
            kernels in model_new.py, no kernels/ and no glue; on the CPU the judge interprets them).

    Returns:
        The workspace root.

    Raises:
        ConfigError: unknown device or language, or `root` holds files and `force` is off.
    """
    if device not in DEVICES:
        raise ConfigError(f"unknown device {device!r}: use one of {', '.join(DEVICES)}")
    if language not in LANGUAGES:
        raise ConfigError(f"unknown kernel language {language!r}: use one of {', '.join(LANGUAGES)}")
    root = Path(root)
    if root.exists() and any(root.iterdir()):
        if not force:
            raise ConfigError(f"{root} is not empty: pick a new folder or pass --force to replace it")
        shutil.rmtree(root)
    source = template_dir()
    glue = () if language == "triton" else FIXED_FILES
    (root / "utils").mkdir(parents=True)
    (root / STATE_DIR).mkdir()
    (root / "SKILL.md").write_text(skill_text(device, language))
    (root / "model.py").write_text(task.code)
    template = triton_template(task) if language == "triton" else model_new_template(task, device)
    (root / "model_new.py").write_text(template)
    for name in glue + UTILS_FILES:
        shutil.copyfile(source / name, root / name)
    if language == "cuda":
        (root / "kernels").mkdir()
        for example in sorted((source / device / "kernels").iterdir()):
            shutil.copyfile(example, root / "kernels" / example.name)
    record = {"task": task.model_dump(), "device": device, "language": language}
    (root / TASK_RECORD).write_text(json.dumps(record, indent=1))
    for name in ("SKILL.md", "model.py", *glue, *UTILS_FILES):
        (root / name).chmod(0o444)
    return root


def read_task_record(root: Path) -> tuple[Task, str]:
    """The task and device a workspace was created for.

    Raises:
        ConfigError: `root` is not a workspace made by `create_workspace`.
    """
    path = Path(root) / TASK_RECORD
    if not path.is_file():
        raise ConfigError(
            f"{root} is not a cuda-agent workspace (no {TASK_RECORD}); create one with "
            "`cuda-agent workspace create TASK DIR`"
        )
    record = json.loads(path.read_text())
    return Task.model_validate(record["task"]), record["device"]


def workspace_language(root: Path) -> Language:
    """The kernel language a workspace was created for ('cuda' for a record written before languages existed).

    Raises:
        ConfigError: `root` is not a workspace made by `create_workspace`.
    """
    read_task_record(root)
    return json.loads((Path(root) / TASK_RECORD).read_text()).get("language", "cuda")
