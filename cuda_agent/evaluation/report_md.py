"""report.md: the paper's table layout, CUDA Agent's published row beside ours, then the details."""

from __future__ import annotations

from cuda_agent.evaluation.metrics import NO_LEVEL
from cuda_agent.evaluation.records import BenchReport, GroupMetrics, Metrics, TaskResult
from cuda_agent.evaluation.speed_of_light import fraction
from cuda_agent.types import Timings

PAPER_OVERALL = {"pass_rate": 0.988, "faster_than_compile": 0.968, "speedup_compile": 2.11, "speedup_eager": 2.60}
"""CUDA Agent's headline on KernelBench L1-3 (arXiv 2602.24286; DESIGN.md section 2)."""
PAPER_LEVELS = {"L1": (0.97, 1.87), "L2": (1.00, 2.80), "L3": (0.90, 1.52)}
"""Per level: share faster than torch.compile, geometric-mean speedup over compile."""

HEADER = "| | tasks | pass rate | faster than eager | faster than compile | speedup vs eager | speedup vs compile |"
RULE = "|---|---|---|---|---|---|---|"


def suite_label(suite: str, limit: int = 60) -> str:
    """The suite as a title: a comma-separated task list becomes its size and its first references."""
    refs = [r.strip() for r in suite.split(",") if r.strip()]
    if len(refs) <= 1 and len(suite) <= limit:
        return suite
    shown = []
    for ref in refs:
        if len(", ".join([*shown, ref])) > limit - 12:
            break
        shown.append(ref)
    rest = len(refs) - len(shown)
    return f"{len(refs)} tasks: {', '.join(shown)}" + (f", and {rest} more" if rest else "")


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _x(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}x"


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x:.4g}"


def _row(label: str, m: GroupMetrics) -> str:
    return (
        f"| {label} | {m.tasks} | {_pct(m.pass_rate)} | {_pct(m.faster_than_eager)} | {_pct(m.faster_than_compile)} "
        f"| {_x(m.geomean_speedup_eager)} | {_x(m.geomean_speedup_compile)} |"
    )


def _paper_row(group: str | None) -> str | None:
    if group is None:
        p = PAPER_OVERALL
        return (
            f"| CUDA Agent (paper) | 250 | {_pct(p['pass_rate'])} | — | {_pct(p['faster_than_compile'])} "
            f"| {_x(p['speedup_eager'])} | {_x(p['speedup_compile'])} |"
        )
    if group in PAPER_LEVELS:
        faster, speedup = PAPER_LEVELS[group]
        tasks = 50 if group == "L3" else 100
        return f"| CUDA Agent (paper) | {tasks} | — | — | {_pct(faster)} | — | {_x(speedup)} |"
    return None


def _tables(runs: list[tuple[str, Metrics]]) -> list[str]:
    lines = ["## Overall", "", HEADER, RULE, _paper_row(None) or ""]
    lines += [_row(label, metrics.overall) for label, metrics in runs]
    groups = runs[0][1].groups
    for group in groups if list(groups) != [NO_LEVEL] else []:  # one unlevelled group repeats the overall table
        lines += ["", f"## {group}", "", HEADER, RULE]
        paper = _paper_row(group)
        lines += [paper] if paper else []
        lines += [_row(label, metrics.groups[group]) for label, metrics in runs]
    return lines


def _fast_p(runs: list[tuple[str, Metrics]]) -> list[str]:
    ps = list(runs[0][1].overall.fast_p_eager)
    lines = ["## fast_p (KernelBench: correct and speedup > p, over all tasks)", ""]
    lines += ["| | baseline | " + " | ".join(f"p={p}" for p in ps) + " |", "|---|---|" + "---|" * len(ps)]
    for label, metrics in runs:
        for name, values in (("eager", metrics.overall.fast_p_eager), ("compile", metrics.overall.fast_p_compile)):
            lines.append(f"| {label} | {name} | " + " | ".join(_pct(values[p]) for p in ps) + " |")
    return lines


def _counts(runs: list[tuple[str, Metrics]]) -> list[str]:
    lines = ["## Verdicts and rejections", ""]
    for label, metrics in runs:
        verdicts = ", ".join(f"{k} {v}" for k, v in metrics.overall.verdicts.items())
        rules = ", ".join(f"`{k}` {v}" for k, v in metrics.overall.rejections.items()) or "none"
        groups = [("all", metrics.overall)] + [(g, m) for g, m in metrics.groups.items() if g != NO_LEVEL]
        own = ", ".join(f"{g} {_pct(m.custom_kernel_time_fraction)}" for g, m in groups)
        lines += [
            f"- {label}: {verdicts}",
            f"  - rejections by rule: {rules}",
            f"  - own kernels' share of the solution's time, median over correct solutions: {own}",
        ]
    return lines


def _task_line(result: TaskResult) -> str:
    v = result.verdict
    t = v.timings_ms if v else None
    sol = result.speed_of_light
    bound = sol.bound_ms if sol else None
    outcome = v.verdict if v else result.status
    return (
        f"| {result.ref} | {outcome} | {v.language if v else '-'} | {_ms(t and t.solution)} | {_ms(t and t.eager)} | {_ms(t and t.compile)} "
        f"| {_x(v and v.speedup_vs_eager)} | {_x(v and v.speedup_vs_compile)} | {_ms(bound)} "
        f"| {_pct(fraction(bound, t and t.solution))} | {_pct(fraction(bound, t and t.eager))} "
        f"| {_pct(fraction(bound, t and t.compile))} | {_pct(v and v.custom_kernel_time_fraction)} "
        f"| {_kernels(t)} | {t.basis if t and t.solution else '—'} |"
    )


def _kernels(t: Timings | None) -> str:
    """The kernel times (solution / eager / compile, ms), '—' where none were measured (the CPU)."""
    k = t.kernel if t else None
    return "—" if k is None else f"{_ms(k.solution)} / {_ms(k.eager)} / {_ms(k.compile)}"


def _tasks(report: BenchReport) -> list[str]:
    lines = [
        "## Tasks",
        "",
        "Language: the solution's kernels, cuda (C++/CUDA) or triton. Times in ms (medians). SOL: speed-of-light "
        "bound; % SOL: bound / time (100% = at it). Own: the share of "
        "the solution's time spent in its own kernels rather than torch's operators (custom_kernel_time_fraction, "
        "from a profiled call; GPU time on CUDA, CPU time on the CPU). Kernels: the summed kernel durations inside "
        "one call (solution / eager / compile, the paper's basis; GPU only). Basis: what the reward and speedups "
        "were decided on, whole calls or kernel times where eager's whole call is mostly overhead.",
        "",
    ]
    lines += [
        "| task | verdict | language | solution | eager | compile | vs eager | vs compile | SOL | % SOL solution "
        "| % SOL eager | % SOL compile | own | kernels | basis |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    return lines + [_task_line(r) for r in report.tasks]


def _cell(text: str) -> str:
    return text.replace("|", "\\|") or "—"


def _refusals(report: BenchReport) -> list[str]:
    """Each refusal's rule, whether KernelBench would refuse it too, why, and what to do (refusals.py)."""
    if not report.refusals:
        return []
    same = sum(not r.differs_from_kernelbench for r in report.refusals)
    lines = [
        "## Refusals",
        "",
        f"{len(report.refusals)} task(s) did not pass; {same} of them KernelBench's own evaluation would refuse too "
        "(as far as this judge knows), the others for a rule of this judge's (the KernelBench column says why).",
        "",
        "| task | verdict | rule | KernelBench | reason | what to do |",
        "|---|---|---|---|---|---|",
    ]
    for r in report.refusals:
        kernelbench = f"passes: {r.differs_from_kernelbench}" if r.differs_from_kernelbench else "refuses too"
        lines.append(
            f"| {r.ref} | {r.verdict} | `{r.rule}` | {_cell(kernelbench)} | {_cell(r.reason)} | {_cell(r.action)} |"
        )
    return [*lines, ""]


def render_markdown(report: BenchReport) -> str:
    """The whole report.md."""
    cfg = report.config
    runs = [("this run" if report.final_metrics is None else "this run, best in trajectory", report.metrics)]
    if report.final_metrics is not None:
        runs.append(("this run, final workspace", report.final_metrics))
    missing = sum(r.status == "missing" for r in report.tasks)
    failed = [r for r in report.tasks if r.status == "failed"]
    errors = [r for r in report.tasks if r.status == "error"]
    env = report.environment
    what = f"model `{cfg.model}`" if cfg.model else f"solutions `{cfg.solutions}`"
    lines = [
        f"# Benchmark: {suite_label(cfg.suite)}" + (f" levels {cfg.levels}" if cfg.levels else ""),
        "",
        f"{what} on {env.get('device_name', cfg.device)} (torch {env.get('torch')}, judge protocol "
        f"{report.protocol_version}, policy {cfg.judge.get('policy', 'cuda-agent')}), {report.created_at}.",
        "",
        "Rates are over all tasks but errors of ours: a task with no solution, or whose input could not be judged, "
        "counts as failed. Faster means t < 0.95 t_baseline (strictly more than 5%; where intervals were measured, "
        "across them: the solution's upper end below 0.95 of the baseline's lower end); speedups are geometric means "
        f"over correct solutions only. {missing} task(s) had no solution and {len(failed)} an input that could not "
        f"be judged (both count as failed); {len(errors)} ended in an error of ours (no verdict exists: left out of "
        "every rate, retried by `--resume`). CUDA Agent's row is the paper's (KernelBench L1-3 on its GPU), "
        "for comparison only.",
        "",
    ]
    if not report.finished:
        lines += [
            f"**Unfinished run**: it stopped before its end; this report covers the {len(report.tasks)} task(s) its "
            "results.jsonl holds, and every rate is over those. Carry it on with `cuda-agent bench --resume` and "
            "the same --out and settings.",
            "",
        ]
    lines += _tables(runs) + [""] + _fast_p(runs) + [""] + _counts(runs) + [""] + _refusals(report)
    for title, rows in (("Inputs that could not be judged (counted as failed)", failed), ("Errors of ours", errors)):
        lines += [f"## {title}", ""] + [f"- {r.ref}: {r.error}" for r in rows] + [""] if rows else []
    if report.ceilings:
        c = report.ceilings
        lines += [
            f"Speed-of-light ceilings ({c.device}): copy {c.copy_bytes_per_s / 1e9:.1f} GB/s, "
            f"FP32 {c.flops_per_s / 1e9:.1f} GFLOP/s; {c.source}.",
            "",
        ]
    return "\n".join(lines + _tasks(report)) + "\n"
