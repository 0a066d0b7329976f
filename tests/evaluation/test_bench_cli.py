"""Done-when test: `cuda-agent bench --solutions` over the bundled examples, with good, broken and hostile
solutions (tests/evaluation/solutions/README.md), writes all three reports with the right figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.cli import main
from cuda_agent.evaluation.metrics import geometric_mean
from cuda_agent.reward import beats
from tests.user import cli, guide_text

SOLUTIONS = Path(__file__).parent / "solutions"
# Short timing phases keep the test quick; the baselines' cache key ignores them (they come from the cache).
QUICK = ["--judge", "target_phase_s=0.05", "--judge", "min_reps=3", "--judge", "max_reps=20"]
EXPECTED = {
    "examples/relu": "pass",
    "examples/row_sum": "pass",
    "examples/scale_add": "incorrect",
    "examples/softmax": "rejected",
    "examples/linear_gelu": "compile_error",
    "examples/matmul": "missing",
}


@pytest.mark.integration
@pytest.mark.slow
def test_bench_judges_solutions_and_writes_three_reports(tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = ["bench", "--suite", "examples", "--solutions", str(SOLUTIONS), "--device", "cpu", "--out", str(out)]
    assert main(argv + QUICK) == 0

    report = json.loads((out / "results.json").read_text())
    outcomes = {t["ref"]: (t["verdict"] or {}).get("verdict", t["status"]) for t in report["tasks"]}
    assert outcomes == EXPECTED
    overall = report["metrics"]["overall"]
    timings = [
        t["verdict"]["timings_ms"] for t in report["tasks"] if t["status"] == "judged" and t["verdict"]["correct"]
    ]
    assert overall["tasks"] == 6 and overall["correct"] == 2
    assert overall["pass_rate"] == pytest.approx(2 / 6)
    faster = sum(beats(t["solution"], t["compile"]) for t in timings)
    assert overall["faster_than_compile"] == pytest.approx(faster / 6)
    expected_geomean = geometric_mean(t["compile"] / t["solution"] for t in timings)
    assert overall["geomean_speedup_compile"] == pytest.approx(expected_geomean)
    assert overall["verdicts"] == {"compile_error": 1, "incorrect": 1, "missing": 1, "pass": 2, "rejected": 1}
    assert overall["rejections"] == {"forward_calls_no_kernel": 1, "torch_compute_in_forward": 1}
    assert report["protocol_version"] and report["environment"]["judge_env"]["flags"]
    relu = next(t for t in report["tasks"] if t["ref"] == "examples/relu")
    assert relu["speed_of_light"]["bytes_moved"] == 2 * 128 * 1024 * 4  # x read once, the output written once

    markdown = (out / "report.md").read_text()
    assert "| CUDA Agent (paper) | 250 | 98.8% | — | 96.8% | 2.60x | 2.11x |" in markdown
    assert "| this run | 6 | 33.3% |" in markdown
    assert "1 task(s) had no solution and 0 an input that could not be judged (both count as failed)" in markdown
    page = (out / "report.html").read_text()
    assert page.count("<svg") == 3 and "<script" not in page

    # Resuming a finished run judges nothing again; starting over in the same folder is refused.
    lines = (out / "results.jsonl").read_text().count("\n")
    assert main(argv + QUICK + ["--resume", "--no-speed-of-light"]) == 0
    assert (out / "results.jsonl").read_text().count("\n") == lines
    assert main(argv + QUICK) == 2


@pytest.mark.integration
@pytest.mark.slow
def test_bench_with_a_model_scores_best_and_final(tmp_path: Path) -> None:
    """A replayed agent (the bundled CPU demo episode) solves relu; both of its verdicts are scored and reported."""
    from cuda_agent.agent.demo import recording_path
    from cuda_agent.tasks.catalog import EXAMPLES_DIR

    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "relu.py").write_text((EXAMPLES_DIR / "relu.py").read_text())
    out = tmp_path / "run"
    model = f"replay:{recording_path('cpu')}"
    argv = [
        "bench",
        "--suite",
        str(suite),
        "--model",
        model,
        "--device",
        "cpu",
        "--out",
        str(out),
        "--no-speed-of-light",
    ]
    assert main(argv + QUICK) == 0

    report = json.loads((out / "results.json").read_text())
    (task,) = report["tasks"]
    assert task["verdict"]["verdict"] == task["final"]["verdict"] == "pass"
    assert task["episode"]["exit_status"] == "finished" and Path(task["episode"]["trajectory"]).is_file()
    assert report["metrics"]["overall"]["pass_rate"] == report["final_metrics"]["overall"]["pass_rate"] == 1.0
    assert set(report["metrics"]["groups"]) == {"no level"}
    assert "| this run, final workspace | 1 | 100.0% |" in (out / "report.md").read_text()


def test_bench_with_a_missing_solutions_folder_leaves_nothing_behind(tmp_path: Path) -> None:
    done = cli(
        "bench", "--suite", "examples", "--solutions", str(tmp_path / "nowhere"), "--out", "runs/x", cwd=tmp_path
    )
    assert done.returncode == 2 and done.stdout == ""  # no progress bar
    assert (
        done.stderr
        == f"error: --solutions {tmp_path / 'nowhere'}: no such folder (give a folder of solution files, or 'examples')\n"
    )
    assert list(tmp_path.iterdir()) == []  # no run folder, no config.json


ROOT = Path(__file__).resolve().parents[2]
MIXED_SUITE = "solutions/kernelbench_mixed/cpu_problems"


def readme_argv(start: str) -> list[str]:
    """The guide's one command line that starts with `start` (README or docs/; continued lines joined, its comment cut),
    split."""
    import shlex

    joined = guide_text().replace("\\\n", " ")
    [line] = [line for line in joined.splitlines() if line.startswith(start)]
    return shlex.split(line.split("#")[0])


def one_task_suite(suite: str, ref: str, levels: list[int] | None = None) -> str:
    """`suite` cut to the slice that holds `ref` alone (the smallest input of a command the guide shows)."""
    from cuda_agent.evaluation.suites import select_tasks

    index = [task.ref for task in select_tasks(suite)].index(ref)
    sliced = f"{suite}[{index}:{index + 1}]"
    assert [task.ref for task in select_tasks(sliced, levels)] == [ref]
    return sliced


@pytest.mark.integration
@pytest.mark.slow
def test_readme_bench_of_the_bundled_solutions_and_its_report_run_as_written(tmp_path: Path) -> None:
    """docs/evaluation.md's `bench --solutions examples` and `bench report`, as written but for a slice of one task (relu)."""
    argv = readme_argv("cuda-agent bench --suite examples ")
    assert argv[3] == "examples" and "--solutions" in argv and argv[-2] == "--out"
    argv[3] = one_task_suite("examples", "examples/relu")
    done = cli(*argv[1:], cwd=tmp_path, timeout_s=900)  # the guide's relative --out lands in tmp_path
    assert done.returncode == 0, done.stderr
    out = tmp_path / argv[-1]
    [task] = json.loads((out / "results.json").read_text())["tasks"]
    assert (task["ref"], task["status"], task["verdict"]["verdict"]) == ("examples/relu", "judged", "pass")
    assert Path(task["solution"]).parent.name == "cpu"  # the bundled solutions for the device asked for
    assert all(task["verdict"]["timings_ms"][k] for k in ("solution", "eager", "compile"))

    report = readme_argv("cuda-agent bench report ")
    assert len(report) == 4
    (out / "report.md").unlink()
    done = cli(*report[1:-1], str(out.relative_to(tmp_path)), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "| this run | 1 | 100.0% |" in (out / "report.md").read_text()


@pytest.mark.integration
@pytest.mark.slow
def test_readme_baselines_and_seed_cache_run_as_written(tmp_path: Path, shared_dir: Path) -> None:
    """docs/evaluation.md's `bench baselines` on one level-1 task (L1/12, the smallest: 16 Mi elements, no matmul), then
    `bench seed-cache` into an empty cache: the judge then reads the file's times there instead of timing."""
    from cuda_agent.evaluation.baselines import load_file
    from cuda_agent.judge import JudgeConfig, reference_timings
    from cuda_agent.tasks import Catalog

    argv = readme_argv("cuda-agent bench baselines ")
    assert argv[3:5] == ["--suite", "kernelbench"] and argv[5:7] == ["--levels", "1"]
    argv[4] = one_task_suite("kernelbench", "kernelbench/L1/12", [1])
    done = cli(*argv[1:], cwd=tmp_path, timeout_s=900)
    assert done.returncode == 0, done.stderr
    data = load_file(tmp_path / argv[argv.index("--out") + 1])
    entry = data.entries["kernelbench/L1/12"]
    assert list(data.entries) == ["kernelbench/L1/12"] and entry.eager_ms and entry.compile_ms and entry.error is None

    seed = readme_argv("cuda-agent bench seed-cache ")
    cache = tmp_path / "cache"
    done = cli(*seed[1:], cwd=tmp_path, env={"CUDA_AGENT_CACHE": str(cache)})
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{seed[-1]}: seeded 1 baselines into the judge's cache\n"
    config = JudgeConfig(device=data.environment["device"], cache_dir=cache)
    assert reference_timings(Catalog().resolve("kernelbench/L1/12"), config) == entry.result  # read, not re-timed

    # The comment's other form: the cache's own folder (what a device run returns) seeds a fresh cache the same way,
    # beside the file in one call.
    fresh, folder = tmp_path / "fresh", cache / "baselines"
    done = cli(*seed[1:], str(folder), cwd=tmp_path, env={"CUDA_AGENT_CACHE": str(fresh)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{p}: seeded 1 baselines into the judge's cache" for p in (seed[-1], folder)]
    config = JudgeConfig(device=data.environment["device"], cache_dir=fresh)
    assert reference_timings(Catalog().resolve("kernelbench/L1/12"), config) == entry.result


@pytest.mark.integration
@pytest.mark.slow
def test_readme_mixed_cpu_bench_runs_as_written_on_one_of_its_problems(tmp_path: Path) -> None:
    """docs/judge.md's bench of the mixed CPU solutions under kernelbench, as written but for a slice of one problem (all 22
    take over an hour on 2 cores) and --out in tmp_path. matmul_gelu_softmax: the judge's slow test builds it too."""
    from cuda_agent.evaluation.suites import select_tasks

    argv = readme_argv(f"cuda-agent bench --suite {MIXED_SUITE} ")
    assert argv[:3] == ["cuda-agent", "bench", "--suite"] and argv[-2:] == ["--out", "runs/mixed_cpu"]
    index = [task.name for task in select_tasks(MIXED_SUITE)].index("matmul_gelu_softmax")
    argv[3] = f"{MIXED_SUITE}[{index}:{index + 1}]"
    argv[-1] = str(tmp_path / "mixed_cpu")
    done = cli(*argv[1:], cwd=ROOT, timeout_s=900)
    assert done.returncode == 0, done.stderr

    report = json.loads((tmp_path / "mixed_cpu" / "results.json").read_text())
    [task] = report["tasks"]
    verdict = task["verdict"]
    assert (task["ref"], verdict["verdict"], verdict["policy"]) == (
        f"{MIXED_SUITE}::matmul_gelu_softmax",
        "pass",
        "kernelbench",
    )
    assert verdict["timings_ms"]["solution"] and verdict["timings_ms"]["compile"]  # timed, as the command asks
    assert 0 < verdict["custom_kernel_time_fraction"] < 1  # torch's matmul plus its own kernel
    assert "own kernels' share of the solution's time" in (tmp_path / "mixed_cpu" / "report.md").read_text()
