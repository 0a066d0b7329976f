"""Workspace layout: what is created, what may be edited, tamper detection, SKILL.md vs the judge's rules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from cuda_agent.errors import ConfigError
from cuda_agent.judge.policy import RULES, check_policy
from cuda_agent.judge.policy.triton import RULES as TRITON_RULES
from cuda_agent.judge.solution import read_solution
from cuda_agent.tasks import Catalog
from cuda_agent.types import LANGUAGES
from cuda_agent.workspace import create_workspace, is_editable, read_task_record, tampered_files, workspace_language
from cuda_agent.workspace.layout import skill_text

ROOT = Path(__file__).resolve().parents[2]

# Every check name the run stage can put in a verdict's violations (child/grader.py, child/trial.py)
# plus the workspace's own: SKILL.md must name each, so the agent learns the rule before it hits it.
RUNTIME_CHECKS = {
    "torch_compute_at_runtime",
    "mutated_inputs",
    "late_output_write",
    "non_tensor_output",
    "global_state_changed",
    "l2_persistence",
    "reduced_precision",
    "protected_file_modified",
    "work_while_stopped",
}


def _runtime_checks_in_judge() -> set[str]:
    """Check names written as literals in the judge's run-time code: Violation(check=...) and _fail(..., name)."""
    names = {"reduced_precision", "subclasses_reference"}  # chosen by expressions (grader.py, shim.py)
    for path in sorted((ROOT / "cuda_agent" / "judge").rglob("*.py")):  # every module: a moved one stays read
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            for kw in node.keywords:
                if kw.arg == "check" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                    names.add(kw.value.value)
            if isinstance(node.func, ast.Name) and node.func.id == "_fail" and len(node.args) == 3:
                names.add(node.args[2].value)
    return names


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_skill_names_every_rule_the_judge_enforces(device: str, language: str) -> None:
    text = skill_text(device, language)
    rules = set(RULES) - (set() if language == "triton" else set(TRITON_RULES))  # Triton's own concern Triton
    missing_static = [rule for rule in sorted(rules) if f"`{rule}`" not in text]
    assert not missing_static, f"SKILL.md does not name static rules {missing_static}"
    runtime = _runtime_checks_in_judge()
    assert runtime >= RUNTIME_CHECKS, runtime  # the list above is not stale
    missing_runtime = [name for name in sorted(RUNTIME_CHECKS | runtime) if f"`{name}`" not in text]
    assert not missing_runtime, f"SKILL.md does not name runtime checks {missing_runtime}"
    other = "cpu" if device == "cuda" else "cuda"
    assert f"<!-- {other} -->" not in text and f"<!-- {device} -->" not in text


def test_editable_paths() -> None:
    assert is_editable("model_new.py")
    assert is_editable("kernels/relu.cu") and is_editable("kernels/relu_binding.cpp") and is_editable("kernels/a.cuh")
    for path in (
        "model.py",
        "SKILL.md",
        "binding.cpp",
        "binding_registry.h",
        "utils/verification.py",
        "kernels/sub/x.cu",
        "../model_new.py",
        "/tmp/model_new.py",
        "kernels/notes.txt",
        ".cuda_agent/task.json",
    ):
        assert not is_editable(path), path


def test_create_lays_out_the_workspace(tmp_path: Path) -> None:
    task = Catalog().resolve("examples/linear_gelu")
    root = create_workspace(task, tmp_path / "ws", device="cpu")
    for name in (
        "SKILL.md",
        "model.py",
        "model_new.py",
        "binding.cpp",
        "binding_registry.h",
        "utils/compile.sh",
        "utils/verification.py",
        "utils/profiling.py",
        "kernels/example_scale.cpp",
        "kernels/example_scale_binding.cpp",
    ):
        assert (root / name).is_file(), name
    assert (root / "model.py").read_text() == task.code
    assert read_task_record(root) == (task, "cpu")
    # The template keeps the reference's signatures, so the agent starts from the right interface.
    template = ast.parse((root / "model_new.py").read_text())
    reference = ast.parse(task.code)

    def params(tree: ast.Module, cls: str, method: str) -> list[str]:
        node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
        fn = next(n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == method)
        return [a.arg for a in fn.args.args]

    for method in ("__init__", "forward"):
        assert params(template, "ModelNew", method) == params(reference, "Model", method)
    assert tampered_files(root, task) == []


def test_create_refuses_a_used_folder_and_bad_device(tmp_path: Path) -> None:
    task = Catalog().resolve("examples/relu")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "mine.txt").write_text("keep")
    with pytest.raises(ConfigError, match="not empty"):
        create_workspace(task, tmp_path / "ws")
    with pytest.raises(ConfigError, match="unknown device"):
        create_workspace(task, tmp_path / "other", device="tpu")
    create_workspace(task, tmp_path / "ws", force=True)
    assert not (tmp_path / "ws" / "mine.txt").exists()


def test_tampering_is_detected_file_by_file(tmp_path: Path) -> None:
    task = Catalog().resolve("examples/relu")
    root = create_workspace(task, tmp_path / "ws", device="cuda")
    for name in ("utils/verification.py", "binding_registry.h", "model.py"):
        path = root / name
        path.chmod(0o644)
        path.write_text(path.read_text() + "\n# changed\n")
    (root / "kernels" / "mine.cu").write_text("// the agent's file\n")
    (root / "model_new.py").write_text("# the agent's model\n")
    assert sorted(tampered_files(root, task)) == ["binding_registry.h", "model.py", "utils/verification.py"]
    # The other device's SKILL.md is a legitimate copy; anything else is not.
    (root / "SKILL.md").chmod(0o644)
    (root / "SKILL.md").write_text(skill_text("cpu"))
    assert "SKILL.md" not in tampered_files(root, task)
    (root / "SKILL.md").write_text("do whatever you like")
    assert "SKILL.md" in tampered_files(root, task)


def test_create_lays_out_a_triton_workspace(tmp_path: Path) -> None:
    task = Catalog().resolve("examples/softmax")
    root = create_workspace(task, tmp_path / "ws", device="cpu", language="triton")
    assert sorted(p.name for p in root.iterdir()) == [".cuda_agent", "SKILL.md", "model.py", "model_new.py", "utils"]
    assert workspace_language(root) == "triton" and read_task_record(root) == (task, "cpu")
    assert (root / "SKILL.md").read_text() == skill_text("cpu", "triton") and "@triton.jit" in skill_text(
        "cpu", "triton"
    )
    template = (root / "model_new.py").read_text()
    assert "@triton.jit" in template and "import triton.language as tl" in template
    assert tampered_files(root, task) == []
    # The template parses, keeps the signatures and holds a worked kernel; its forward still launches nothing.
    solution = read_solution(root)
    assert solution.language == "triton"
    assert [v.check for v in check_policy(solution, "cpu")] == ["forward_calls_no_kernel"]
    with pytest.raises(ConfigError, match="kernel language"):
        create_workspace(task, tmp_path / "other", language="cute")
    assert workspace_language(create_workspace(task, tmp_path / "cuda")) == "cuda"
