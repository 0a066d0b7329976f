"""The parity report: every refusal's rule, whether KernelBench would refuse it too, why, and what to do."""

from __future__ import annotations

from cuda_agent.evaluation.bench import build_report
from cuda_agent.evaluation.records import BenchConfig, TaskResult
from cuda_agent.evaluation.report_md import render_markdown
from cuda_agent.judge.policy import check_policy
from cuda_agent.judge.solution import SolutionSource
from cuda_agent.types import Verdict, Violation
from tests.judge.threats._static import solution


def _result(ref: str, verdict: Verdict | None, status: str = "judged", error: str | None = None) -> TaskResult:
    return TaskResult(ref=ref, name=ref, status=status, verdict=verdict, error=error)


def _verdict(name: str, message: str = "", violations: list[Violation] | None = None, checks=None) -> Verdict:
    return Verdict(
        task="t",
        verdict=name,
        reward=-1,
        correct=False,
        message=message,
        violations=violations or [],
        checks=checks or [],
    )


def _kernelbench_violation() -> Violation:
    """A real static finding under the kernelbench policy: a thread left running (KernelBench does not look)."""
    source = solution(prelude="import threading", forward="threading.Thread(target=print).start()\nreturn x")
    found = check_policy(SolutionSource(python=source), "cuda", policy="kernelbench")
    return next(v for v in found if v.check in ("background_thread", "forbidden_import"))


def test_each_refusal_says_its_rule_whether_kernelbench_refuses_too_and_what_to_do() -> None:
    static = _kernelbench_violation()
    precision = Violation(check="reduced_precision", message="error against float64 3e-4 exceeds 1e-5")
    robustness = [{"label": "trial", "ok": True}, {"label": "robustness", "transform": "negate", "ok": False}]
    results = [
        _result("a", _verdict("pass").model_copy(update={"reward": 1, "correct": True})),
        _result("b", _verdict("rejected", static.message, [static])),
        _result("c", _verdict("rejected", precision.message, [precision])),
        _result("d", _verdict("incorrect", "3.1% of elements differ", checks=robustness)),
        _result("e", _verdict("compile_error", "error: no operator '+' matches\nthese operands")),
        _result("f", None, status="missing", error="no solution file for f"),
    ]
    config = BenchConfig(suite="kernelbench", solutions="x", judge={"policy": "kernelbench"}, speed_of_light=False)
    report = build_report(config, results, [], "cpu")
    by_ref = {r.ref: r for r in report.refusals}
    assert sorted(by_ref) == ["b", "c", "d", "e", "f"]  # the pass is no refusal
    b = by_ref["b"]
    assert b.rule == static.check and b.differs_from_kernelbench and b.action
    assert "Differs from KernelBench" not in b.reason and "\n" not in b.reason
    assert by_ref["c"].differs_from_kernelbench.startswith("KernelBench's 1e-2 tolerance")
    assert by_ref["c"].action.startswith("compute the float32 task in float32")
    assert "negated" in by_ref["d"].differs_from_kernelbench
    assert (by_ref["e"].rule, by_ref["e"].differs_from_kernelbench) == ("compile_error", "")
    assert by_ref["e"].reason == "error: no operator '+' matches these operands"  # one line
    assert (by_ref["f"].verdict, by_ref["f"].action) == ("missing", "add a solution file for this task")
    page = render_markdown(report)
    assert "## Refusals" in page and "5 task(s) did not pass; 2 of them KernelBench's own evaluation" in page
    assert f"| b | rejected | `{static.check}` | passes: " in page


def test_a_torch_only_solution_is_named_as_one_kernelbench_passes() -> None:
    """KernelBench's evaluation passed 11 held-out solutions whose forward never calls their extension."""
    source = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
    found = check_policy(SolutionSource(python=source + "        return torch.relu(x)\n"), "cpu", policy="kernelbench")
    config = BenchConfig(suite="examples", solutions="x", judge={"policy": "kernelbench"}, speed_of_light=False)
    report = build_report(config, [_result("a", _verdict("rejected", found[0].message, found))], [], "cpu")
    (refusal,) = report.refusals
    assert refusal.rule == "forward_calls_no_kernel"
    assert refusal.differs_from_kernelbench.startswith("KernelBench does not look whether forward calls")
    assert refusal.action.startswith("call a function of the compiled extension")


def test_rules_the_kernelbench_policy_drops_are_named_as_such_under_cuda_agent() -> None:
    torch_ops = Violation(check="torch_compute_at_runtime", message="ATen compute ops ran in forward: aten::add x1")
    config = BenchConfig(suite="kernelbench", solutions="x", speed_of_light=False)
    report = build_report(config, [_result("a", _verdict("rejected", "torch", [torch_ops]))], [], "cpu")
    (refusal,) = report.refusals
    assert refusal.differs_from_kernelbench.startswith("KernelBench lets torch compute")
    assert refusal.action.startswith("move the torch operators")
