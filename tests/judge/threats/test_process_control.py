"""Threat 18: killing or hanging the process, or printing fake success lines (static and runtime)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.judge.threats._hacks import judge_hack, model_new
from tests.judge.threats._static import LAUNCH, checks, expect, solution


def test_template_is_legit() -> None:
    assert checks(solution()) == set()


@pytest.mark.parametrize("launch", ["exit(0);", "std::abort();", "kill(0, 9);", "sleep(1000);", "std::exit(0);"])
def test_rejects_process_control_in_cpp(launch: str) -> None:
    assert checks(solution(launch=launch)) == expect({"file_or_network_access"})


@pytest.mark.parametrize("statement", ["exit(0)", "raise SystemExit(0)", "quit()"])
def test_rejects_process_control_in_python(statement: str) -> None:
    forward = f"{statement}\nreturn ext.relu_forward(x)"
    assert checks(solution(forward=forward)) == expect({"file_or_network_access", "torch_compute_in_forward"})


def test_printing_is_allowed_because_the_judge_ignores_it() -> None:
    source = solution(prelude='print("verdict: pass, speedup 10x")', launch=LAUNCH + '\n    printf("PASS\\n");')
    assert checks(source) == set()


# Runtime: the judge end to end on the CPU, sharing one build of the hack extension (see _hacks.py).


@pytest.mark.slow
def test_runtime_reports_exit_from_native_code_as_runtime_error(tmp_path: Path) -> None:
    # relu_exit prints success lines, then calls std::exit(0) through a function pointer.
    verdict = judge_hack(tmp_path, "examples/relu", model_new("return ext.relu_exit(x.contiguous())"))
    assert (verdict.verdict, verdict.correct, verdict.reward) == ("runtime_error", False, -1), verdict.message
    assert "died" in verdict.message


@pytest.mark.parametrize(
    "forward",
    ["import os\nos._exit(0)", "raise SystemExit(0)"],
    ids=["os_exit", "system_exit"],
)
def test_runtime_reports_exit_from_python_as_runtime_error(tmp_path: Path, forward: str) -> None:
    verdict = judge_hack(tmp_path, "examples/relu", model_new(forward), static_policy=False)
    assert (verdict.verdict, verdict.correct) == ("runtime_error", False), verdict.message


@pytest.mark.slow
def test_runtime_ignores_printed_success_lines(tmp_path: Path) -> None:
    # relu_print_pass prints PASS and a verdict-like JSON line, then returns a copy of x (wrong).
    verdict = judge_hack(tmp_path, "examples/relu", model_new("return ext.relu_print_pass(x.contiguous())"))
    assert (verdict.verdict, verdict.correct) == ("incorrect", False), verdict.message


@pytest.mark.slow
def test_runtime_reports_a_hang_as_timeout(tmp_path: Path) -> None:
    verdict = judge_hack(tmp_path, "examples/relu", model_new("return ext.relu_hang(x.contiguous())"), run_timeout_s=20)
    assert (verdict.verdict, verdict.correct) == ("timeout", False), verdict.message
