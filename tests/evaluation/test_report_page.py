"""report.html as a person sees it: `cuda-agent bench report DIR` on a committed run, in a headless Chromium."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from cuda_agent.evaluation.report_html import markdown_to_html
from tests.user import browser_page, cli

RUN = Path(__file__).parents[2] / "bench" / "results" / "cpu-2026-12-02" / "bench_examples"


def rendered_run(tmp_path: Path, suite: str, verdict: dict | None = None) -> Path:
    """The committed CPU examples run, its suite written as the given list (and every verdict's fields as given),
    rendered again by the CLI."""
    out = tmp_path / "run"
    out.mkdir()
    report = json.loads((RUN / "results.json").read_text())
    report["config"]["suite"] = suite
    for task in report["tasks"] if verdict else []:
        task["verdict"].update(verdict)
        task["final"] = None
    (out / "results.json").write_text(json.dumps(report))
    shutil.copy(RUN / "config.json", out / "config.json")
    done = cli("bench", "report", str(out))
    assert done.returncode == 0, done.stderr
    return out


def test_markdown_tables_become_html_tables() -> None:
    page = markdown_to_html("## Overall\n\n| | tasks |\n|---|---|\n| this run | 6 |\n\n- a: `rule` 1\n  - b\n")
    assert page == (
        "<h3>Overall</h3><table><tr><th></th><th>tasks</th></tr><tr><td>this run</td><td>6</td></tr></table>"
        "<ul><li>a: <code>rule</code> 1</li><li class=sub>b</li></ul>"
    )


def test_report_page_in_a_headless_browser(tmp_path: Path) -> None:
    refs = [t["ref"] for t in json.loads((RUN / "results.json").read_text())["tasks"]]
    out = rendered_run(tmp_path, ",".join(refs))
    html = (out / "report.html").read_text()
    assert "| task |" not in html and "|---|" not in html  # no Markdown pasted as text
    with browser_page() as page:
        page.goto((out / "report.html").as_uri())
        # A comma-joined suite is named by its size and first tasks, not written out whole.
        title = f"cuda-agent bench: {len(refs)} tasks: examples/linear_gelu, examples/matmul, and 4 more"
        assert page.title() == title
        assert page.locator("h1").inner_text() == title.replace("cuda-agent bench", "Benchmark")
        assert page.locator("svg").count() == 3
        tasks = page.locator(".details table").last
        assert tasks.locator("th").first.inner_text() == "task"
        assert tasks.locator("tr").count() == len(refs) + 1
        assert tasks.locator("tr").nth(1).locator("td").first.inner_text() in refs
        # Nothing runs off the page sideways: the widest element fits the viewport.
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)


def test_a_run_where_nothing_passed_draws_no_empty_boxes_and_no_repeated_rows(tmp_path: Path) -> None:
    """No correct solution: no speed-up distribution (its boxes would be empty), a line saying why; tasks without a
    level are one group, whose rows would repeat the "all" rows."""
    wrong = {
        "verdict": "incorrect",
        "correct": False,
        "reward": -1,
        "speedup_vs_eager": None,
        "speedup_vs_compile": None,
    }
    html = (rendered_run(tmp_path, "examples", wrong) / "report.html").read_text()
    assert html.count("<svg") == 2 and "No solution passed: there is no speed-up to draw." in html
    summary = html.split("<table>")[1]
    assert "this run (best), all" in summary and "no level" not in summary
