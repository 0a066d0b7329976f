"""Build-cache keys and compiler-log trimming (no compiler runs here)."""

from __future__ import annotations

from pathlib import Path

from cuda_agent.judge.build import trim_compile_log
from cuda_agent.judge.solution import SolutionSource, read_solution
from tests.judge.helpers import example_solution, with_forward_body

RELU = example_solution("relu")


def test_modelnew_only_changes_share_a_build() -> None:
    variant = with_forward_body(RELU, "y = relu_ext.relu_forward(x.contiguous())\nreturn y")
    assert SolutionSource(python=RELU).build_hash == SolutionSource(python=variant).build_hash
    assert SolutionSource(python=RELU).content_hash != SolutionSource(python=variant).content_hash


def test_kernel_or_string_changes_get_their_own_build() -> None:
    kernel = RELU.replace("0.0f : v", "0.0f : v + 0.0f")
    lazy = with_forward_body(RELU, "return relu_ext.relu_forward(x.contiguous()) if 'other source' else None")
    base = SolutionSource(python=RELU).build_hash
    assert SolutionSource(python=kernel).build_hash != base
    assert SolutionSource(python=lazy).build_hash != base


def test_workspace_kernel_files_count_in_the_key(tmp_path: Path) -> None:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "model_new.py").write_text(RELU)
    (tmp_path / "kernels" / "k.cu").write_text("__global__ void k() {}")
    first = read_solution(tmp_path).build_hash
    (tmp_path / "kernels" / "k.cu").write_text("__global__ void k() { }")
    assert read_solution(tmp_path).build_hash != first


def test_trim_keeps_first_error_with_location_and_context() -> None:
    log = "\n".join(
        [
            "[1/2] c++ -MMD -MF main.o.d -O3 -c main.cpp -o main.o",
            "FAILED: main.o",
            "main.cpp: In function 'at::Tensor f(at::Tensor)':",
            "main.cpp:12:5: error: 'undeclared' was not declared in this scope",
            "   12 |     undeclared;",
            "      |     ^~~~~~~~~~",
            "main.cpp:20:1: error: expected ';' before '}' token",
            "ninja: build stopped: subcommand failed.",
        ]
    )
    trimmed = trim_compile_log(log)
    assert trimmed.startswith("main.cpp:12:5: error: 'undeclared'")
    assert "12 |     undeclared;" in trimmed and "(1 more error lines)" in trimmed
    assert "ninja" not in trimmed and "-MMD" not in trimmed


def test_trim_without_error_line_keeps_the_tail() -> None:
    log = "\n".join(f"line {i}" for i in range(100))
    assert trim_compile_log(log).splitlines()[-1] == "line 99"
