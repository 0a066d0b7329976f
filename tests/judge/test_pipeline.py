"""End-to-end judgements on the CPU: legit solutions pass, each kind of failure gets its verdict."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from cuda_agent.cli import main
from cuda_agent.errors import JudgeInfraError, TaskError
from cuda_agent.judge import JudgeConfig, baseline_key, judge
from cuda_agent.tasks import Catalog
from cuda_agent.types import Task, Verdict
from tests.conftest import has_gpu
from tests.judge.helpers import (
    EXAMPLES,
    example_solution,
    hungry_reference,
    replace_model_new,
    run_judge,
    with_forward_body,
)

RELU = example_solution("relu")


@pytest.mark.parametrize("name", ["relu", "softmax", "linear_gelu"])
@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_load_that_compiles_in_the_run_stage_is_not_a_hang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Its source differs from one process to the next (not by its pid: each is 2 in its own PID namespace), so the
    # extension the build stage compiled is not the one
    # its import in the run stage loads: torch's loader compiles there, past the 2 s step limit. That is a slow
    # import, not a hang (CI saw correct kernels killed as `timeout` so), and the verdict says where the time went.
    monkeypatch.setenv("CCACHE_DISABLE", "1")  # the compile really runs (torch wraps c++ in ccache where found)
    source = RELU.replace(
        "relu_ext = load_inline(",
        "import os\ncpp_source += f'\\nstatic int loaded_by_{os.urandom(8).hex()} = 0;\\n'\nrelu_ext = load_inline(",
    )
    verdict = run_judge(tmp_path, "examples/relu", source, static_policy=False, step_floor_s=2.0)
    assert (verdict.verdict, verdict.reward) == ("pass", 1), verdict.message
    assert verdict.stage_s["run.build_grace"] > 0
    assert "main.o is dirty" in verdict.env["run_stage_built"]  # ninja's own reason, as a dry run explained it


@pytest.mark.slow
def test_a_solution_whose_top_level_fails_after_its_build_is_its_error_and_the_build_says_how_it_ended(
    tmp_path: Path,
) -> None:
    source = RELU.replace("class ModelNew(", "raise ValueError('unready')\n\n\nclass ModelNew(", 1)
    verdict = run_judge(tmp_path, "examples/relu", source, static_policy=False)
    assert (verdict.verdict, verdict.reward) == ("runtime_error", -1), verdict.message
    assert "unready" in verdict.message
    assert verdict.env["build_unfinished"] == "exit 4: ValueError: unready"  # build.IMPORT_FAILED


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
    from cuda_agent.judge.solution import SolutionSource
    from cuda_agent.machine import cache_root

    assert run_judge(tmp_path, "examples/relu", RELU).verdict == "pass"
    ext_dir = ext_dir_for(SolutionSource(python=RELU).build_hash, "cpu", cache_root())
    builds = [ninja.parent for ninja in ext_dir.glob("*/build.ninja")]
    assert builds, f"no load_inline build folder in {ext_dir}"
    for folder in builds:  # what a process killed inside torch's loader leaves: its FileBaton, forever
        (folder / "lock").write_text("")
    # Unconfined: a confined candidate loads from a private copy of the folder (judge/confine.py), and removes the
    # stale lock there, not here.
    again = run_judge(tmp_path, "examples/relu", RELU, run_timeout_s=120, candidate_user=None)
    assert again.verdict == "pass", again.message  # without the cleanup: a wait until the run limit
    assert not any((folder / "lock").exists() for folder in builds)


@pytest.mark.slow
def test_a_wait_for_the_build_folder_held_by_another_process_is_our_failure_not_a_timeout(tmp_path: Path) -> None:
    import fcntl
    import os

    from cuda_agent.judge.build import LOADING_LOCK, ext_dir_for
    from cuda_agent.judge.solution import SolutionSource
    from cuda_agent.machine import cache_root

    assert run_judge(tmp_path, "examples/relu", RELU).verdict == "pass"
    ext_dir = ext_dir_for(SolutionSource(python=RELU).build_hash, "cpu", cache_root())
    # What another judgement's build of the same bytes does meanwhile: it holds the folder while it compiles.
    fd = os.open(ext_dir / LOADING_LOCK, os.O_RDONLY | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        # Unconfined: a confined candidate loads from a private copy of the folder (judge/confine.py), which no
        # other process holds.
        with pytest.raises(JudgeInfraError, match="before the candidate's code ran"):
            run_judge(tmp_path, "examples/relu", RELU, adaptive_limits=False, run_timeout_s=8, candidate_user=None)
    finally:
        os.close(fd)
    assert run_judge(tmp_path, "examples/relu", RELU).verdict == "pass"


RELU_TASK = (EXAMPLES / "problems" / "relu.py").read_text()
HUNGRY_REFERENCE = hungry_reference()


def test_cpu_baselines_are_kept_per_thread_count_gpu_ones_whatever_the_cpu_threads() -> None:
    # A baseline timed on 4 threads would otherwise answer a judgement that times the candidate on 1.
    one, four = (JudgeConfig(device="cpu", cpu_threads=n) for n in (1, 4))
    assert baseline_key(RELU_TASK, "cpu", one) != baseline_key(RELU_TASK, "cpu", four)
    assert baseline_key(RELU_TASK, "cuda", one) == baseline_key(RELU_TASK, "cuda", four)


def judge_new_task(tmp_path: Path, source: str, task_code: str = RELU_TASK, **config) -> Verdict:
    """Judge `source` on a copy of `task_code` that no earlier run has seen, so no verdict of it is cached yet
    (the build is shared: it depends on the solution only)."""
    path = tmp_path / "solution.py"
    path.write_text(source)
    unique = f"{task_code}\n# {uuid.uuid4().hex}\n"
    task = Task(ref="inline/relu", name="relu", source="inline", code=unique)
    return judge(task, path, JudgeConfig(**{"device": "cpu", "time": False, **config}))


def test_out_of_memory_of_ours_before_the_candidate_ran_is_our_error_not_a_verdict(tmp_path: Path) -> None:
    with pytest.raises(JudgeInfraError, match="not the candidate's.*can't allocate memory.*second try") as caught:
        judge_new_task(tmp_path, RELU, HUNGRY_REFERENCE)
    assert caught.value.out_of_memory


def test_a_reference_that_cannot_run_is_a_task_error_before_the_candidate_runs(tmp_path: Path) -> None:
    # The grader runs the reference once before any candidate code (Grader.warm_reference): a broken task is
    # said to be one, never scored against the candidate's first trial.
    broken = RELU_TASK.replace("return torch.relu(x)", "raise ValueError('broken task')")
    assert broken != RELU_TASK
    with pytest.raises(TaskError, match="reference's forward raised ValueError: broken task"):
        judge_new_task(tmp_path, RELU, broken)


def test_out_of_memory_in_our_comparison_on_both_tries_is_the_candidates_runtime_error(tmp_path: Path) -> None:
    # After the candidate's code ran, its process holds what memory it took; a shortage that a fresh process
    # meets again is put down to it, never dropped as ours.
    verdict = judge_new_task(tmp_path, RELU, hungry_reference("forward"))
    assert (verdict.verdict, verdict.reward) == ("runtime_error", -1)
    assert "on both tries" in verdict.message and "can't allocate memory" in verdict.message
    assert verdict.env["run_attempts"] == 2


def test_out_of_memory_in_the_candidates_forward_stays_its_runtime_error(tmp_path: Path) -> None:
    source = with_forward_body(RELU, "torch.empty(1 << 60, dtype=torch.uint8)\nreturn relu_ext.relu_forward(x)")
    path = tmp_path / "solution.py"
    path.write_text(source)
    task = Task(ref="inline/relu", name="relu", source="inline", code=f"{RELU_TASK}\n# {uuid.uuid4().hex}\n")
    config = JudgeConfig(device="cpu", time=False, static_policy=False, trials=1)
    verdict = judge(task, path, config)
    assert (verdict.verdict, verdict.reward) == ("runtime_error", -1)
    assert "ModelNew.forward raised" in verdict.message and "can't allocate memory" in verdict.message
    again = judge(Task(ref="inline/relu", name="relu", source="inline", code=task.code), path, config)
    assert again.env["verdict_cached"] is False  # whether it fits depends on what else held memory: judged again


@pytest.mark.parametrize(
    ("raised", "cached"),
    [
        ("bytearray(1 << 62)", False),  # MemoryError, whose message is empty
        ("raise ValueError('out of memory')", True),  # its own words: a deterministic crash like any other
    ],
    ids=["memory_error", "says_out_of_memory"],
)
@pytest.mark.slow
def test_an_allocation_failure_in_the_candidates_call_is_judged_again_its_words_are_not(
    tmp_path: Path, raised: str, cached: bool
) -> None:
    # Whether the candidate's allocation fits depends on what else held memory, so that verdict is not kept;
    # the worker says so in a field of its result, not in words the candidate's exception can choose.
    path = tmp_path / "solution.py"
    path.write_text(with_forward_body(RELU, f"{raised}\nreturn relu_ext.relu_forward(x)"))
    task = Task(ref="inline/relu", name="relu", source="inline", code=f"{RELU_TASK}\n# {uuid.uuid4().hex}\n")
    config = JudgeConfig(device="cpu", time=False, static_policy=False, trials=1)
    assert judge(task, path, config).verdict == "runtime_error"
    assert judge(task, path, config).env["verdict_cached"] is cached


def test_cli_exits_3_with_one_line_on_our_failure(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    task, solution = tmp_path / "hungry.py", tmp_path / "solution.py"
    task.write_text(HUNGRY_REFERENCE)
    solution.write_text(RELU)
    assert main(["judge", str(task), str(solution), "--device", "cpu", "--no-time", "--json"]) == 3
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert "not the candidate's" in captured.err


def test_device_cuda_without_a_gpu_exits_2_at_once(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    if has_gpu():
        pytest.skip("this machine has a GPU")
    solution = tmp_path / "solution.py"
    solution.write_text(RELU)
    start = time.monotonic()
    assert main(["judge", "examples/relu", str(solution), "--device", "cuda"]) == 2
    assert time.monotonic() - start < 5
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no GPU" in err
    with pytest.raises(JudgeInfraError, match="no GPU"):  # the library (a pool's worker) says it is ours
        judge(Catalog().resolve("examples/relu"), solution, JudgeConfig(device="cuda"))
    out = tmp_path / "run"
    for argv in (
        ["demo", "--out", str(out)],
        ["bench", "--suite", "examples", "--solutions", "examples", "--out", str(out)],
    ):
        assert main([*argv, "--device", "cuda"]) == 2 and "no GPU" in capsys.readouterr().err
    assert not out.exists()  # refused before any work


@pytest.mark.slow
def test_a_repeated_candidate_is_served_from_the_verdict_cache(tmp_path: Path) -> None:
    path = tmp_path / "solution.py"
    path.write_text(RELU)
    task = Task(ref="inline/relu", name="relu", source="inline", code=f"{RELU_TASK}\n# {uuid.uuid4().hex}\n")
    config = JudgeConfig(device="cpu", time=False, trials=2)
    first = judge(task, path, config)
    assert first.verdict == "pass" and first.env["verdict_cached"] is False
    start = time.monotonic()
    again = judge(task.model_copy(update={"ref": "examples/relu_again"}), path, config)
    assert time.monotonic() - start < 1.0
    assert again.env["verdict_cached"] is True and list(again.stage_s) == ["verdict_cache"]
    assert again.task == "examples/relu_again" and again.env["cached_from"]["stage_s"] == first.stage_s
    assert again.model_dump(exclude={"env", "stage_s", "task"}) == first.model_dump(exclude={"env", "stage_s", "task"})
    path.write_text(RELU + "\n")
    assert judge(task, path, config).env["verdict_cached"] is False  # one byte more: judged again
    path.write_text(RELU)
    assert judge(task, path, config.model_copy(update={"trials": 1})).env["verdict_cached"] is False
    assert judge(task, path, config.model_copy(update={"verdict_cache": False})).env["verdict_cached"] is False


@pytest.mark.slow
def test_load_dependent_verdicts_are_not_cached(tmp_path: Path) -> None:
    source = with_forward_body(RELU, "while True:\n    pass\nreturn relu_ext.relu_forward(x.contiguous())")
    path = tmp_path / "solution.py"
    path.write_text(source)
    task = Task(ref="inline/relu", name="relu", source="inline", code=f"{RELU_TASK}\n# {uuid.uuid4().hex}\n")
    config = JudgeConfig(device="cpu", time=False, run_timeout_s=8)
    assert judge(task, path, config).verdict == "timeout"
    again = judge(task, path, config)
    assert again.verdict == "timeout" and again.env["verdict_cached"] is False


def test_a_worker_that_dies_before_the_candidate_runs_is_our_failure_after_it_the_candidates(tmp_path: Path) -> None:
    dies_loading = RELU_TASK.replace("super().__init__()", "super().__init__()\n        import os\n        os._exit(7)")
    with pytest.raises(JudgeInfraError, match=r"died \(exit 7\) before the candidate's code ran"):
        judge_new_task(tmp_path, RELU, dies_loading, verdict_cache=False)
    source = with_forward_body(RELU, "import os\nos._exit(7)")
    verdict = judge_new_task(tmp_path, source, static_policy=False, verdict_cache=False)
    assert verdict.verdict == "runtime_error" and "exit 7" in verdict.message


@pytest.mark.slow
def test_a_result_file_written_by_the_candidate_is_never_read(tmp_path: Path) -> None:
    # The grader writes the run's result in a folder of ours; the candidate's process runs in a folder of its own.
    # What it writes there, claiming our failure or its success, is never read: its exit is its runtime_error.
    forged = '{"status": "judge_error", "message": "forged", "out_of_memory": true}'
    body = (
        "import os\n"
        f"for name in ('run_result.json', '../run_result.json'):\n    try:\n        open(name, 'w').write({forged!r})\n"
        "    except OSError:\n        pass\nos._exit(0)"
    )
    path = tmp_path / "solution.py"
    path.write_text(with_forward_body(RELU, body))
    task = Task(ref="inline/relu", name="relu", source="inline", code=f"{RELU_TASK}\n# {uuid.uuid4().hex}\n")
    config = JudgeConfig(device="cpu", time=False, static_policy=False, trials=1)
    verdict = judge(task, path, config)
    assert (verdict.verdict, verdict.reward) == ("runtime_error", -1), verdict.message
    assert "the candidate's process died (exit 0)" in verdict.message


@pytest.mark.gpu
def test_cuda_out_of_memory_is_ours_in_the_reference_set_up_and_the_candidates_in_its_forward(tmp_path: Path) -> None:
    cuda_relu = example_solution("relu", "cuda")
    hungry = RELU_TASK.replace(  # built before the candidate's code loads
        "super().__init__()", "torch.empty(1 << 50, dtype=torch.uint8, device='cuda')\n        super().__init__()"
    )
    with pytest.raises(JudgeInfraError, match="OutOfMemoryError.*second try") as caught:
        judge_new_task(tmp_path, cuda_relu, hungry, device="cuda")
    assert caught.value.out_of_memory
    greedy = with_forward_body(
        cuda_relu, "torch.empty(1 << 50, dtype=torch.uint8, device=x.device)\nreturn relu_ext.relu_forward(x)"
    )
    verdict = judge_new_task(tmp_path, greedy, device="cuda", static_policy=False)
    assert verdict.verdict == "runtime_error" and "OutOfMemoryError" in verdict.message


@pytest.mark.slow
def test_an_exception_with_a_huge_message_is_the_candidates_runtime_error_cut_to_size(tmp_path: Path) -> None:
    source = with_forward_body(RELU, "raise ValueError('x' * 100000)")
    verdict = run_judge(tmp_path, "examples/relu", source, static_policy=False)
    assert (verdict.verdict, verdict.reward) == ("runtime_error", -1), verdict.message[:300]
    assert verdict.message.startswith("ModelNew.forward raised ValueError") and len(verdict.message) <= 20_000
