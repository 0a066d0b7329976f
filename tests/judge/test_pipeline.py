"""End-to-end judgements on the CPU: legit solutions pass, each kind of failure gets its verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.cli import main
from tests.judge.helpers import example_solution, replace_model_new, run_judge, with_forward_body

RELU = example_solution("relu")


@pytest.mark.parametrize("name", ["relu", "softmax", "linear_gelu"])
def test_legit_cpu_solution_passes(tmp_path: Path, name: str) -> None:
    verdict = run_judge(tmp_path, f"examples/{name}", example_solution(name))
    assert (verdict.verdict, verdict.correct, verdict.reward) == ("pass", True, 1), verdict.message
    assert verdict.violations == []
    assert len([c for c in verdict.checks if c["label"] == "trial"]) == 5


def test_timed_judgement_reports_times_and_reward(tmp_path: Path) -> None:
    verdict = run_judge(tmp_path, "examples/relu", RELU, time=True, min_reps=3, max_reps=5, warmup_reps=1)
    assert verdict.verdict == "pass"
    t = verdict.timings_ms
    assert t.solution > 0 and t.eager > 0 and t.compile > 0
    assert verdict.speedup_vs_eager == pytest.approx(t.eager / t.solution)
    assert verdict.reward in (1, 2, 3)
    assert verdict.env["flags"]["matmul_allow_tf32"] is False
    assert {"policy", "build", "run"} <= verdict.stage_s.keys()
    assert verdict.checks[-1]["label"] == "recheck"
    again = run_judge(tmp_path, "examples/relu", RELU, time=True, min_reps=3, max_reps=5, warmup_reps=1)
    assert again.env["baseline_cached"] is True and again.env["build_cached"] is True


def test_wrong_kernel_is_incorrect(tmp_path: Path) -> None:
    wrong = RELU.replace("dst[i] = v < 0.0f ? 0.0f : v;", "dst[i] = v < 0.5f ? 0.0f : v;")
    verdict = run_judge(tmp_path, "examples/relu", wrong)
    assert verdict.verdict == "incorrect" and verdict.reward == -1
    assert "differ" in verdict.message


def test_compile_error_is_trimmed_to_the_first_error(tmp_path: Path) -> None:
    broken = RELU.replace("dst[i] = v < 0.0f ? 0.0f : v;", "dst[i] = undeclared_name;")
    verdict = run_judge(tmp_path, "examples/relu", broken)
    assert verdict.verdict == "compile_error" and verdict.reward == -1
    assert "undeclared_name" in verdict.compile_log and "error" in verdict.compile_log
    assert len(verdict.compile_log.splitlines()) <= 12


def test_forward_raising_is_runtime_error(tmp_path: Path) -> None:
    source = with_forward_body(RELU, "return relu_ext.relu_forward(x.contiguous(), 3)")
    verdict = run_judge(tmp_path, "examples/relu", source)
    assert verdict.verdict == "runtime_error"
    assert "ModelNew.forward raised" in verdict.message


def test_wrong_constructor_signature_is_runtime_error(tmp_path: Path) -> None:
    source = RELU.replace("def __init__(self):", "def __init__(self, width):")
    verdict = run_judge(tmp_path, "examples/relu", source)
    assert verdict.verdict == "runtime_error"
    assert "ModelNew(*get_init_inputs())" in verdict.message


def test_wrong_output_arity_is_incorrect(tmp_path: Path) -> None:
    source = with_forward_body(RELU, "y = relu_ext.relu_forward(x.contiguous())\nreturn y, y")
    verdict = run_judge(tmp_path, "examples/relu", source)
    assert verdict.verdict == "incorrect"
    assert "2 outputs" in verdict.message


def test_hanging_forward_times_out(tmp_path: Path) -> None:
    source = with_forward_body(RELU, "while True:\n    pass\nreturn relu_ext.relu_forward(x.contiguous())")
    verdict = run_judge(tmp_path, "examples/relu", source, run_timeout_s=20)
    assert verdict.verdict == "timeout" and verdict.reward == -1


def test_missing_model_new_is_rejected(tmp_path: Path) -> None:
    source = replace_model_new(RELU, "class Other:\n    pass\n")
    verdict = run_judge(tmp_path, "examples/relu", source)
    assert verdict.verdict == "rejected"
    assert [v.check for v in verdict.violations] == ["missing_model_new"]


def test_syntax_error_is_rejected_without_traceback(tmp_path: Path) -> None:
    verdict = run_judge(tmp_path, "examples/relu", "class ModelNew(:\n")
    assert verdict.verdict == "rejected"
    assert verdict.violations[0].check == "syntax_error"
    assert "Traceback" not in verdict.message


def test_cli_json_prints_one_object(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "s.py"
    path.write_text("class ModelNew(:\n")
    assert main(["judge", "examples/relu", str(path), "--device", "cpu", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["verdict"] == "rejected" and payload["reward"] == -1
    keys = {"verdict", "reward", "correct", "violations", "timings_ms", "speedup_vs_eager", "speedup_vs_compile"}
    assert keys | {"device", "env"} <= payload.keys()


def test_cli_missing_solution_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["judge", "examples/relu", str(tmp_path / "missing.py")]) == 2
    assert "no such solution" in capsys.readouterr().err


def test_cli_binary_solution_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "s.py"
    path.write_bytes(b"\xff\xfe\x00\x81")
    assert main(["judge", "examples/relu", str(path), "--device", "cpu"]) == 2
    assert "not a text file" in capsys.readouterr().err


def test_a_lock_left_by_a_killed_load_is_removed_and_the_judgement_goes_on(tmp_path: Path) -> None:
    from cuda_agent.judge.build import ext_dir_for
    from cuda_agent.judge.config import default_cache_dir
    from cuda_agent.judge.solution import SolutionSource

    assert run_judge(tmp_path, "examples/relu", RELU).verdict == "pass"
    ext_dir = ext_dir_for(SolutionSource(python=RELU).build_hash, "cpu", default_cache_dir())
    builds = [ninja.parent for ninja in ext_dir.glob("*/build.ninja")]
    assert builds, f"no load_inline build folder in {ext_dir}"
    for folder in builds:  # what a process killed inside torch's loader leaves: its FileBaton, forever
        (folder / "lock").write_text("")
    again = run_judge(tmp_path, "examples/relu", RELU, run_timeout_s=120)
    assert again.verdict == "pass", again.message  # without the cleanup: a wait until the run limit
    assert not any((folder / "lock").exists() for folder in builds)
