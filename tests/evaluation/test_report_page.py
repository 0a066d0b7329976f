"""report.html as a person sees it: `cuda-agent bench report DIR` on a committed run, in a headless Chromium."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from cuda_agent.evaluation.report_html import markdown_to_html
from tests.user import browser_page, cli

RUN = Path(__file__).parents[2] / "bench" / "results" / "cpu-2026-12-02" / "bench_examples"


def rendered_run(tmp_path: Path, suite: str) -> Path:
    """The committed CPU examples run, its suite written as the given list, rendered again by the CLI."""
    out = tmp_path / "run"
    out.mkdir()
    report = json.loads((RUN / "results.json").read_text())
    report["config"]["suite"] = suite
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
