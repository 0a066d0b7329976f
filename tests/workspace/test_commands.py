"""The workspace's protected tools driven as the agent drives them: `bash utils/compile.sh`,
`python -m utils.verification`, `python -m utils.profiling`, then `cuda-agent judge TASK DIR`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_agent.judge import JudgeConfig, judge
from cuda_agent.tasks import Catalog
from cuda_agent.workspace import create_workspace
from cuda_agent.workspace.checks import CHECKS_FILE_ENV, CheckReader, editable_digest

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions" / "workspaces"
TRITON_RELU = ROOT / "cuda_agent" / "tasks" / "examples" / "solutions" / "triton" / "relu.py"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # `python` must be the interpreter that has cuda_agent, as in an activated virtual environment.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["CUDA_AGENT_PYTHON"] = sys.executable
    return env


def _run(root: Path, *argv: str, checks: Path | None = None) -> subprocess.CompletedProcess:
    env = _env() | ({CHECKS_FILE_ENV: str(checks)} if checks else {})
    return subprocess.run(list(argv), cwd=root, env=env, capture_output=True, text=True, timeout=600)


def _workspace(tmp_path: Path, ref: str, device: str, solution: str) -> Path:
    root = create_workspace(Catalog().resolve(ref), tmp_path / "ws", device=device)
    for kernel in (SOLUTIONS / solution / "kernels").iterdir():
        shutil.copyfile(kernel, root / "kernels" / kernel.name)
    shutil.copyfile(SOLUTIONS / solution / "model_new.py", root / "model_new.py")
    return root


@pytest.mark.slow
def test_cpu_workspace_from_kernel_to_passing_verdict(tmp_path: Path) -> None:
    root = _workspace(tmp_path, "examples/relu", "cpu", "examples_relu_cpu")
    compiled = _run(root, "bash", "utils/compile.sh")
    assert compiled.returncode == 0 and "compile: OK" in compiled.stdout, compiled.stdout + compiled.stderr
    checks = tmp_path / "checks.jsonl"  # what the agent loop reads (the printout is for the model)
    verified = _run(root, sys.executable, "-m", "utils.verification", checks=checks)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    lines = verified.stdout.splitlines()
    assert lines[-1] == "verification: PASS"
    assert sum(line.startswith("[pass] trial") for line in lines) == 5 and "Traceback" not in verified.stderr
    profiled = _run(root, sys.executable, "-m", "utils.profiling", checks=checks)
    assert profiled.returncode == 0, profiled.stdout + profiled.stderr
    assert "torch.compile" in profiled.stdout and "profiling: reward" in profiled.stdout
    recorded = CheckReader(checks).new()
    assert [(c.tool, c.verdict, c.digest) for c in recorded] == [
        ("verification", "pass", editable_digest(root)),
        ("profiling", "pass", editable_digest(root)),
    ]
    assert f"profiling: reward {recorded[1].reward} " in profiled.stdout and recorded[1].score == recorded[1].reward
    verdict = judge(Catalog().resolve("examples/relu"), root, JudgeConfig(device="cpu", time=False))
    assert verdict.verdict == "pass" and verdict.reward == 1, verdict.message


def test_edited_protected_file_is_rejected_by_tools_and_judge(tmp_path: Path) -> None:
    root = _workspace(tmp_path, "examples/relu", "cpu", "examples_relu_cpu")
    verification = root / "utils" / "verification.py"
    verification.chmod(0o644)
    verification.write_text("print('verification: PASS')\n")
    shown = _run(root, sys.executable, "-m", "utils.compile")
    assert shown.returncode == 1 and "REJECTED" in shown.stdout and "utils/verification.py" in shown.stdout
    verdict = judge(Catalog().resolve("examples/relu"), root, JudgeConfig(device="cpu", time=False))
    assert verdict.verdict == "rejected" and verdict.reward == -1
    assert [v.check for v in verdict.violations] == ["protected_file_modified"]


def test_broken_kernel_gives_a_compact_compile_error(tmp_path: Path) -> None:
    root = _workspace(tmp_path, "examples/relu", "cpu", "examples_relu_cpu")
    kernel = root / "kernels" / "relu.cpp"
    kernel.write_text(kernel.read_text().replace("y[i] = ", "y[i] = not_declared + "))
    shown = _run(root, "bash", "utils/compile.sh")
    assert shown.returncode == 1
    lines = shown.stdout.strip().splitlines()
    assert lines[0] == "compile: FAILED"
    assert "kernels/relu.cpp:" in lines[1] and "not_declared" in lines[1] and "error" in lines[1]
    assert len(lines) <= 8 and "ninja" not in shown.stdout
    verdict = judge(Catalog().resolve("examples/relu"), root, JudgeConfig(device="cpu", time=False))
    assert verdict.verdict == "compile_error" and "not_declared" in (verdict.compile_log or "")


@pytest.mark.gpu
def test_cuda_workspace_verifies_on_the_gpu(tmp_path: Path) -> None:
    root = _workspace(tmp_path, "examples/relu", "cuda", "kernelbench_L1_19")
    compiled = _run(root, "bash", "utils/compile.sh")
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    verified = _run(root, sys.executable, "-m", "utils.verification")
    assert verified.returncode == 0 and verified.stdout.splitlines()[-1] == "verification: PASS", verified.stdout


def test_triton_workspace_compile_runs_the_static_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cuda_agent.sandbox.workspace_commands import compile_command

    root = create_workspace(Catalog().resolve("examples/relu"), tmp_path / "ws", device="cpu", language="triton")
    assert compile_command([], root) == 1  # the template launches nothing: refused before anything compiles
    shown = capsys.readouterr().out
    assert shown.startswith("compile: REJECTED") and "launches a Triton kernel" in shown, shown


@pytest.mark.slow
def test_triton_workspace_compile_compiles_the_kernels_for_the_gpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # No GPU here: Triton's own LLVM and ptxas compile the launched kernels for sm_90, and nothing runs.
    pytest.importorskip("triton", reason="needs triton: pip install -e '.[triton]'")
    from cuda_agent.sandbox.workspace_commands import compile_command

    root = create_workspace(Catalog().resolve("examples/relu"), tmp_path / "ws", device="cpu", language="triton")
    shutil.copyfile(TRITON_RELU, root / "model_new.py")
    assert compile_command([], root) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("compile: OK") and ": relu_kernel compiled for sm_90" in shown, shown
    source = TRITON_RELU.read_text()
    (root / "model_new.py").write_text(source.replace("tl.arange(0, BLOCK)", "tl.arange(0, 1000)"))
    assert compile_command([], root) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "compile: FAILED" and "relu_kernel" in lines[1], lines
    assert "tl.arange(0, 1000)" in "\n".join(lines) and lines[-1] == "arange's range must be a power of 2", lines
    assert len(lines) <= 12
    # A GPU workspace on a machine without one (the agent beside, the sandbox service's GPUs judging) compiles too.
    gpu_root = create_workspace(Catalog().resolve("examples/relu"), tmp_path / "gpu", device="cuda", language="triton")
    shutil.copyfile(TRITON_RELU, gpu_root / "model_new.py")
    assert compile_command([], gpu_root) == 0
    assert ": relu_kernel compiled for " in capsys.readouterr().out  # for sm_90 here; for the GPU where there is one


@pytest.mark.gpu
def test_triton_workspace_compile_compiles_for_this_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cuda_agent.sandbox.workspace_commands import compile_command

    root = create_workspace(Catalog().resolve("examples/softmax"), tmp_path / "ws", device="cuda", language="triton")
    shutil.copyfile(TRITON_RELU.with_name("softmax.py"), root / "model_new.py")
    assert compile_command([], root) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("compile: OK") and ": softmax_kernel compiled for" in shown and "sm_90" not in shown, shown


@pytest.mark.slow
def test_triton_workspace_verifies_and_profiles_on_the_cpu_interpreter(tmp_path: Path) -> None:
    pytest.importorskip("triton", reason="needs triton: pip install -e '.[triton]'")
    root = create_workspace(Catalog().resolve("examples/relu"), tmp_path / "ws", device="cpu", language="triton")
    shutil.copyfile(TRITON_RELU, root / "model_new.py")
    checks = tmp_path / "checks.jsonl"
    verified = _run(root, sys.executable, "-m", "utils.verification", checks=checks)
    assert verified.returncode == 0 and verified.stdout.splitlines()[-1] == "verification: PASS", verified.stdout
    profiled = _run(root, sys.executable, "-m", "utils.profiling", checks=checks)
    assert profiled.returncode == 0 and "profiling: reward" in profiled.stdout, profiled.stdout + profiled.stderr
    assert [c.verdict for c in CheckReader(checks).new()] == ["pass", "pass"]
