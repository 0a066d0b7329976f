"""Workspace builds (CPU variant): incremental, content-cached across folders, safe when concurrent."""

from __future__ import annotations

import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cuda_agent.tasks import Catalog
from cuda_agent.workspace import build_tree, create_workspace

ROOT = Path(__file__).resolve().parents[2]
LEGIT = ROOT / "solutions" / "workspaces" / "examples_relu_cpu"


def _workspace(path: Path) -> Path:
    root = create_workspace(Catalog().resolve("examples/relu"), path, device="cpu")
    for kernel in (LEGIT / "kernels").iterdir():
        shutil.copyfile(kernel, root / "kernels" / kernel.name)
    shutil.copyfile(LEGIT / "model_new.py", root / "model_new.py")
    return root


def _call_relu(module_dir: Path) -> str:
    code = (
        f"import sys; sys.path.insert(0, {str(module_dir)!r}); import torch, cuda_extension; "
        "print(cuda_extension.relu(torch.tensor([-1.0, 2.0])).tolist(), cuda_extension.example_scale(torch.ones(2), 3.0).tolist())"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_build_is_incremental_and_the_module_works(tmp_path: Path) -> None:
    root = _workspace(tmp_path / "ws")
    first = build_tree(root, "cpu")
    assert first.ok, first.log
    assert first.units == 5  # the fixed binding.cpp, the example's two files and relu's two
    assert _call_relu(first.module_path.parent) == "[0.0, 2.0] [3.0, 3.0]"
    again = build_tree(root, "cpu")
    assert again.ok and again.compiled == 0
    kernel = root / "kernels" / "relu.cpp"
    kernel.write_text(kernel.read_text().replace("x[i] > 0.f ? x[i] : 0.f", "x[i] > 0.f ? x[i] : 0.0f"))
    edited = build_tree(root, "cpu")
    assert edited.ok and edited.compiled == 1, edited.log


def test_compile_error_is_reported_not_raised(tmp_path: Path) -> None:
    root = _workspace(tmp_path / "ws")
    (root / "kernels" / "relu.cpp").write_text(
        "void relu_launch(const float* x, float* y, long n) { y[0] = undefined_name; }\n"
    )
    outcome = build_tree(root, "cpu")
    assert not outcome.ok and outcome.module_path is None
    assert "relu.cpp" in outcome.log and "undefined_name" in outcome.log


def test_concurrent_builds_of_different_workspaces(tmp_path: Path) -> None:
    roots = [_workspace(tmp_path / f"ws{i}") for i in range(3)]
    with ThreadPoolExecutor(3) as pool:
        outcomes = list(pool.map(lambda r: build_tree(r, "cpu"), roots))
    assert all(o.ok for o in outcomes), [o.log for o in outcomes]
    assert len({o.module_path for o in outcomes}) == 3
    for outcome in outcomes:
        assert _call_relu(outcome.module_path.parent) == "[0.0, 2.0] [3.0, 3.0]"


def test_workspace_without_kernels_builds_the_glue_alone(tmp_path: Path) -> None:
    root = _workspace(tmp_path / "ws")
    shutil.rmtree(root / "kernels")
    outcome = build_tree(root, "cpu")
    assert outcome.ok and outcome.units == 1
