"""The metric arithmetic against values computed by hand."""

from __future__ import annotations

import html
import math

import pytest

from cuda_agent.evaluation.metrics import compute_metrics, geometric_mean, group_metrics
from cuda_agent.evaluation.records import TaskResult
from cuda_agent.types import Timings, Verdict, Violation


def passed(solution: float, eager: float, compile_: float | None) -> Verdict:
    return Verdict(
        task="t",
        verdict="pass",
        reward=1,
        correct=True,
        timings_ms=Timings(solution=solution, eager=eager, compile=compile_),
        speedup_vs_eager=eager / solution,
        speedup_vs_compile=compile_ / solution if compile_ else None,
    )


def failed(name: str, *checks: str) -> Verdict:
    violations = [Violation(check=c, message=c) for c in checks]
    return Verdict(task="t", verdict=name, reward=-1, correct=False, violations=violations)


# A: 2x over eager, 1.5x over compile. B: exactly 5% faster (0.95 t0): NOT faster (strict), speedup 1/0.95.
# C: torch.compile failed on the reference: eager is the compile bar (as in the reward). D, E: failed. F: missing.
VERDICTS = [
    passed(1.0, 2.0, 1.5),
    passed(0.95, 1.0, 1.0),
    passed(0.5, 1.0, None),
    failed("incorrect"),
    failed("rejected", "torch_compute_in_forward", "try_except_fallback"),
    None,
]
OUTCOMES = ["pass", "pass", "pass", "incorrect", "rejected", "missing"]


def test_rates_are_over_all_tasks_with_a_strict_five_percent_margin() -> None:
    m = group_metrics(VERDICTS, OUTCOMES)
    assert (m.tasks, m.correct) == (6, 3)
    assert m.pass_rate == pytest.approx(3 / 6)
    assert m.faster_than_eager == pytest.approx(2 / 6)  # A and C; B sits exactly on the margin
    assert m.faster_than_compile == pytest.approx(2 / 6)


def test_geometric_mean_is_over_correct_solutions_only() -> None:
    m = group_metrics(VERDICTS, OUTCOMES)
    assert m.geomean_speedup_eager == pytest.approx((2.0 * (1 / 0.95) * 2.0) ** (1 / 3))
    assert m.geomean_speedup_compile == pytest.approx((1.5 * (1 / 0.95) * 2.0) ** (1 / 3))


def test_fast_p_counts_speedups_strictly_above_p_over_all_tasks() -> None:
    m = group_metrics(VERDICTS, OUTCOMES)
    # eager speedups 2, 1.0526, 2; compile speedups 1.5, 1.0526, 2 (C against eager)
    assert m.fast_p_eager == pytest.approx({"0": 0.5, "0.5": 0.5, "0.8": 0.5, "1": 0.5, "1.5": 2 / 6, "2": 0.0})
    assert m.fast_p_compile == pytest.approx({"0": 0.5, "0.5": 0.5, "0.8": 0.5, "1": 0.5, "1.5": 1 / 6, "2": 0.0})


def test_counts_verdicts_and_rejections_by_rule() -> None:
    m = group_metrics(VERDICTS, OUTCOMES)
    assert m.verdicts == {"incorrect": 1, "missing": 1, "pass": 3, "rejected": 1}
    assert m.rejections == {"torch_compute_in_forward": 1, "try_except_fallback": 1}


def test_an_empty_group_has_no_speedup() -> None:
    m = group_metrics([None], ["missing"])
    assert (m.pass_rate, m.geomean_speedup_eager, m.fast_p_eager["0"]) == (0.0, None, 0.0)
    assert geometric_mean([]) is None
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)


def test_groups_by_level_and_scores_best_or_final() -> None:
    def result(ref: str, level: int, best: Verdict | None, final: Verdict | None) -> TaskResult:
        status = "judged" if best else "missing"
        return TaskResult(ref=ref, name=ref, level=level, status=status, verdict=best, final=final)

    results = [
        result("kernelbench/L1/1", 1, passed(1.0, 4.0, 2.0), failed("incorrect")),
        result("kernelbench/L1/2", 1, None, None),
        result("kernelbench/L2/1", 2, passed(1.0, 1.0, 1.0), passed(2.0, 1.0, 1.0)),
    ]
    best = compute_metrics(results)
    assert set(best.groups) == {"L1", "L2"}
    assert best.groups["L1"].pass_rate == 0.5
    assert best.overall.geomean_speedup_compile == pytest.approx(math.sqrt(2.0 * 1.0))
    final = compute_metrics(results, pick=lambda r: r.final)
    assert final.overall.correct == 1
    assert final.overall.geomean_speedup_compile == pytest.approx(0.5)
    assert final.groups["L1"].verdicts == {"incorrect": 1, "missing": 1}


def test_errors_of_ours_are_counted_but_left_out_of_every_rate() -> None:
    with_error = group_metrics([passed(1.0, 2.0, 1.5), failed("incorrect"), None], ["pass", "incorrect", "error"])
    without = group_metrics([passed(1.0, 2.0, 1.5), failed("incorrect")], ["pass", "incorrect"])
    assert with_error.verdicts == {"error": 1, "incorrect": 1, "pass": 1}
    assert with_error.model_dump(exclude={"verdicts"}) == without.model_dump(exclude={"verdicts"})
    assert with_error.tasks == 2 and with_error.pass_rate == 0.5


def test_own_kernel_share_is_the_median_over_correct_solutions_and_is_reported() -> None:
    from cuda_agent.evaluation.records import BenchConfig, BenchReport
    from cuda_agent.evaluation.report_html import markdown_to_html
    from cuda_agent.evaluation.report_md import render_markdown

    def share(verdict: Verdict, fraction: float) -> Verdict:
        return verdict.model_copy(update={"custom_kernel_time_fraction": fraction})

    results = [
        TaskResult(ref=f"kernelbench/L1/{i}", name="t", level=1, status="judged", verdict=v)
        for i, v in enumerate([share(passed(1.0, 2.0, 1.5), 0.2), share(passed(1.0, 2.0, 1.5), 0.9)])
    ] + [
        TaskResult(
            ref="kernelbench/L2/1", name="t", level=2, status="judged", verdict=share(passed(1.0, 2.0, 1.5), 0.5)
        ),
        TaskResult(
            ref="kernelbench/L2/2", name="t", level=2, status="judged", verdict=share(failed("incorrect"), 0.01)
        ),
    ]
    metrics = compute_metrics(results)
    assert metrics.overall.custom_kernel_time_fraction == 0.5  # of 0.2, 0.5, 0.9: the incorrect one is left out
    report = BenchReport(
        created_at="2026-12-05T00:00:00Z",
        protocol_version="test",
        config=BenchConfig(suite="kernelbench", solutions="s"),
        environment={},
        metrics=metrics,
        tasks=results,
    )
    line = "own kernels' share of the solution's time, median over correct solutions: all 50.0%, L1 90.0%, L2 50.0%"
    markdown = render_markdown(report)
    assert f"  - {line}" in markdown and html.escape(line) in markdown_to_html(markdown)  # report.html shows it too


def test_a_run_stopped_before_its_end_reports_what_it_finished(tmp_path) -> None:
    """`cuda-agent bench report` on a run cut by a time limit (results.jsonl and config.json, no results.json)."""
    from cuda_agent.errors import ConfigError
    from cuda_agent.evaluation.bench import load_report, write_reports
    from cuda_agent.evaluation.records import BenchConfig

    config = BenchConfig(suite="examples/relu,examples/softmax,examples/row_sum", solutions="s", device="cpu")
    (tmp_path / "config.json").write_text(config.model_dump_json())
    (tmp_path / "results.jsonl").write_text("")
    with pytest.raises(ConfigError, match="no finished task"):
        load_report(tmp_path)
    rows = [
        TaskResult(ref=f"examples/{n}", name=n, source="examples", status="judged", verdict=v)
        for n, v in (("relu", passed(1.0, 2.0, 1.5)), ("softmax", failed("incorrect")))
    ]
    (tmp_path / "results.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in rows) + '{"ref": "exa')
    report = load_report(tmp_path)
    assert not report.finished and [t.ref for t in report.tasks] == ["examples/relu", "examples/softmax"]
    assert report.metrics.overall.pass_rate == pytest.approx(1 / 2)
    write_reports(report, tmp_path)
    assert "**Unfinished run**" in (tmp_path / "report.md").read_text()
    again = load_report(tmp_path)  # with the results.json just written beside it: still marked unfinished
    assert not again.finished and len(again.tasks) == 2
    # Resumed and cut again: the newer results.jsonl wins over the unfinished results.json written before.
    more = TaskResult(
        ref="examples/row_sum", name="row_sum", source="examples", status="judged", verdict=failed("timeout")
    )
    lines = (tmp_path / "results.jsonl").read_text().rsplit("\n", 1)[0] + "\n"  # the torn line dropped
    (tmp_path / "results.jsonl").write_text(lines + more.model_dump_json() + "\n")
    assert [t.ref for t in load_report(tmp_path).tasks][-1] == "examples/row_sum"


def test_report_rows_show_each_solution_s_language() -> None:
    from cuda_agent.evaluation.report_md import _task_line

    def row(verdict: Verdict | None) -> list[str]:
        result = TaskResult(ref="t", name="t", level=None, source="examples", status="judged", verdict=verdict)
        return [cell.strip() for cell in _task_line(result).strip("|").split("|")]

    triton = passed(1.0, 2.0, 1.5).model_copy(update={"language": "triton"})
    assert row(triton)[:3] == ["t", "pass", "triton"]
    assert row(passed(1.0, 2.0, 1.5))[2] == "cuda"
    assert row(None)[2] == "-"
