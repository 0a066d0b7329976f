"""report.html: one self-contained page (inline SVG plots, no scripts, no external files).

Plots: the speedup distribution per level, per-task speedup bars, and each task's fraction of its
speed of light for the solution and both baselines. matplotlib is imported here only, when a page
is rendered (the GPU machine may lack it: `cuda-agent bench report DIR` renders later elsewhere).
"""

from __future__ import annotations

import html
import io
import math
import re
from typing import Any

from cuda_agent.evaluation.metrics import NO_LEVEL, group_of
from cuda_agent.evaluation.records import BenchReport, GroupMetrics, TaskResult
from cuda_agent.evaluation.report_md import PAPER_LEVELS, PAPER_OVERALL, suite_label
from cuda_agent.evaluation.speed_of_light import fraction

COLOURS = {"pass": "#2e7d32", "eager": "#1565c0", "compile": "#ef6c00", "fail": "#c62828"}
STYLE = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:14px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}.paper{color:#666;font-style:italic}
figure{margin:1.5em 0}figcaption{color:#555;font-size:14px}svg{max-width:100%;height:auto}
.details h2{border-bottom:1px solid #ddd;padding-bottom:.2em}
li.sub{list-style:circle;margin-left:1.5em}code{background:#f3f3f3;padding:0 .2em}"""


def _svg(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog and doctype: the page inlines the element


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # no display; also keeps the page the same on every machine
    matplotlib.rcParams["svg.hashsalt"] = "cuda-agent"  # fixed element ids: the same report renders the same page
    import matplotlib.pyplot as plt

    return plt


def _log_axis(ax: Any) -> None:
    """Log scale labelled with plain numbers (0.5, 1, 2) rather than powers of ten."""
    from matplotlib.ticker import FuncFormatter

    ax.set_yscale("log")
    plain = FuncFormatter(lambda value, _pos: f"{value:g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.tick_params(axis="y", which="minor", labelsize=7)


def plot_distribution(tasks: list[TaskResult]) -> str:
    """Per group: the correct solutions' speedups over eager and over compile (log scale, one point each)."""
    plt = _pyplot()
    groups = sorted({group_of(r) for r in tasks})
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for ax, key, colour in ((axes[0], "speedup_vs_eager", "eager"), (axes[1], "speedup_vs_compile", "compile")):
        for i, group in enumerate(groups):
            values = [getattr(r.verdict, key) for r in tasks if group_of(r) == group and _passed(r)]
            values = [v for v in values if v]
            if values:
                ax.boxplot([values], positions=[i], widths=0.5, showfliers=False)
                jitter = [i + 0.15 * math.sin(7.0 * k) for k in range(len(values))]
                ax.scatter(jitter, values, s=12, color=COLOURS[colour], alpha=0.7, zorder=3)
        ax.axhline(1.0, color="#888", lw=0.8)
        ax.axhline(1 / 0.95, color="#888", lw=0.8, ls="--")
        _log_axis(ax)
        ax.set_xticks(range(len(groups)), groups)
        ax.set_title(f"speedup over {colour} (correct solutions)")
    return _svg(fig)


def _passed(result: TaskResult) -> bool:
    return result.verdict is not None and result.verdict.verdict == "pass"


def plot_task_bars(tasks: list[TaskResult]) -> str:
    """One bar per task: speedup over compile (failed tasks marked with a red x at 1)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(6.0, 0.14 * len(tasks) + 2), 3.8))
    for i, r in enumerate(tasks):
        speedup = r.verdict.speedup_vs_compile if _passed(r) and r.verdict else None
        if speedup:
            ax.bar(i, speedup - 1.0, bottom=1.0, color=COLOURS["pass"] if speedup > 1 / 0.95 else "#9e9e9e")
        else:
            ax.scatter([i], [1.0], marker="x", color=COLOURS["fail"], zorder=3)
    ax.axhline(1.0, color="#444", lw=0.8)
    _log_axis(ax)
    ax.set_ylabel("compile time / solution time")
    ax.set_xticks(range(len(tasks)), [r.ref.split("/", 1)[-1] for r in tasks], rotation=90, fontsize=7)
    ax.set_title("per task: speedup over torch.compile (green: >5% faster; x: failed or missing)")
    return _svg(fig)


def plot_speed_of_light(tasks: list[TaskResult]) -> str:
    """Per task: bound / measured time for the solution and both baselines (1.0 = at the speed of light)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(6.0, 0.14 * len(tasks) + 2), 3.8))
    for key, colour, marker in (("solution", "pass", "o"), ("eager", "eager", "s"), ("compile", "compile", "^")):
        xs, ys = [], []
        for i, r in enumerate(tasks):
            bound = r.speed_of_light.bound_ms if r.speed_of_light else None
            measured = getattr(r.verdict.timings_ms, key) if r.verdict else None
            value = fraction(bound, measured)
            if value:
                xs.append(i)
                ys.append(value)
        ax.scatter(xs, ys, color=COLOURS[colour], marker=marker, label=key, s=18, zorder=3)
    ax.axhline(1.0, color="#444", lw=0.8)
    _log_axis(ax)
    ax.set_ylabel("speed-of-light bound / time")
    ax.set_xticks(range(len(tasks)), [r.ref.split("/", 1)[-1] for r in tasks], rotation=90, fontsize=7)
    ax.legend(loc="best", fontsize=8)
    ax.set_title("fraction of the speed of light reached")
    return _svg(fig)


def _fmt(x: float | None, pct: bool = False) -> str:
    if x is None:
        return "—"
    return f"{100 * x:.1f}%" if pct else f"{x:.2f}x"


def _metrics_row(label: str, m: GroupMetrics) -> str:
    cells = [
        str(m.tasks),
        _fmt(m.pass_rate, True),
        _fmt(m.faster_than_eager, True),
        _fmt(m.faster_than_compile, True),
        _fmt(m.geomean_speedup_eager),
        _fmt(m.geomean_speedup_compile),
    ]
    return f"<tr><td>{html.escape(label)}</td>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def _summary_table(report: BenchReport) -> str:
    head = (
        "<tr><th></th><th>tasks</th><th>pass rate</th><th>faster than eager</th><th>faster than compile</th>"
        "<th>speedup vs eager</th><th>speedup vs compile</th></tr>"
    )
    p = PAPER_OVERALL
    rows = [
        f"<tr class=paper><td>CUDA Agent (paper), all</td><td>250</td><td>{_fmt(p['pass_rate'], True)}</td><td>—</td>"
        f"<td>{_fmt(p['faster_than_compile'], True)}</td><td>{_fmt(p['speedup_eager'])}</td>"
        f"<td>{_fmt(p['speedup_compile'])}</td></tr>"
    ]
    runs = [("best", report.metrics)] + ([("final", report.final_metrics)] if report.final_metrics else [])
    for label, metrics in runs:
        rows.append(_metrics_row(f"this run ({label}), all", metrics.overall))
    groups = report.metrics.groups
    for group in groups if list(groups) != [NO_LEVEL] else []:  # one unlevelled group repeats the "all" rows
        if group in PAPER_LEVELS:
            faster, speedup = PAPER_LEVELS[group]
            rows.append(
                f"<tr class=paper><td>CUDA Agent (paper), {group}</td><td></td><td>—</td><td>—</td>"
                f"<td>{_fmt(faster, True)}</td><td>—</td><td>{_fmt(speedup)}</td></tr>"
            )
        for label, metrics in runs:
            rows.append(_metrics_row(f"this run ({label}), {group}", metrics.groups[group]))
    return f"<table>{head}{''.join(rows)}</table>"


_CODE = re.compile(r"`([^`]+)`")


def _inline(text: str) -> str:
    """One Markdown line's text: escaped, `code` spans kept as code (all report.md uses inline)."""
    return _CODE.sub(lambda m: f"<code>{m.group(1)}</code>", html.escape(text))


def _md_table(rows: list[str]) -> str:
    cells = [[c.strip() for c in row.strip().strip("|").split("|")] for row in rows]
    head, body = cells[0], [r for r in cells[1:] if not all(set(c) <= set("-: ") for c in r)]
    thead = "<tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head) + "</tr>"
    tbody = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in body)
    return f"<table>{thead}{tbody}</table>"


def markdown_to_html(markdown: str) -> str:
    """report.md as HTML: headings, tables, bullet lists and paragraphs (the subset report_md writes)."""
    blocks, lines, i = [], markdown.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("|"):
            end = i
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            blocks.append(_md_table(lines[i:end]))
            i = end
            continue
        if line.startswith("- ") or line.startswith("  - "):
            end = i
            while end < len(lines) and (lines[end].startswith("- ") or lines[end].startswith("  - ")):
                end += 1
            items = "".join(
                f"<li{' class=sub' if item.startswith('  ') else ''}>{_inline(item.strip()[2:])}</li>"
                for item in lines[i:end]
            )
            blocks.append(f"<ul>{items}</ul>")
            i = end
            continue
        if line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")) + 1, 4)  # the page's own h1 is above
            blocks.append(f"<h{level}>{_inline(line.lstrip('#').strip())}</h{level}>")
        elif line.strip():
            blocks.append(f"<p>{_inline(line)}</p>")
        i += 1
    return "".join(blocks)


def render_html(report: BenchReport, markdown: str) -> str:
    """The whole page: the summary table, three plots, and report.md's details as HTML tables.

    The speed-up distribution is drawn only where some solution is correct: with none, its boxes are empty."""
    sped = any(_passed(r) and (r.verdict.speedup_vs_eager or r.verdict.speedup_vs_compile) for r in report.tasks)
    figures = [
        *(
            [(plot_distribution(report.tasks), "Speedup distribution per level (dashed: the 5% margin).")]
            if sped
            else []
        ),
        (plot_task_bars(report.tasks), "Per-task speedup over torch.compile."),
        (plot_speed_of_light(report.tasks), "Speed-of-light fraction of the solution and the baselines."),
    ]
    label = html.escape(suite_label(report.config.suite))
    body = [f"<h1>Benchmark: {label}</h1>", _summary_table(report)]
    if not sped:
        body.append("<p>No solution passed: there is no speed-up to draw.</p>")
    body += [f"<figure>{svg}<figcaption>{html.escape(caption)}</figcaption></figure>" for svg, caption in figures]
    details = markdown.split("\n", 1)[1] if markdown.startswith("# ") else markdown  # its title is the page's h1
    body.append(f'<section class="details">{markdown_to_html(details)}</section>')
    return (
        f"<!doctype html><html><head><meta charset=utf-8><title>cuda-agent bench: {label}</title>"
        f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>\n"
    )
