"""`cuda-agent view`: the HTML page of an episode, escaped, checked in a real headless Chromium."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cuda_agent.agent.trajectory import TrajectoryWriter, read_trajectory
from cuda_agent.agent.view import render_html
from cuda_agent.cli import main
from cuda_agent.types import ToolCall, ToolResult, Turn

HOSTILE = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
DIFF = "--- a/kernels/relu.cu\n+++ b/kernels/relu.cu\n@@ -0,0 +1 @@\n+__global__ void relu() {}\n"


def write_trajectory(path: Path) -> Path:
    prompt = [{"role": "system", "content": "skill"}, {"role": "user", "content": "Write a ReLU kernel."}]
    write = ToolCall(id="c0", name="Write", arguments=json.dumps({"path": "kernels/relu.cu", "content": "..."}))
    bash = ToolCall(id="c1", name="Bash", arguments='{"command": "python -m utils.verification"}')
    verdict = {"task": "examples/relu", "verdict": "incorrect", "reward": -1, "correct": False, "message": HOSTILE}
    turns = [
        Turn(
            index=0,
            content=f"I will write a kernel. {HOSTILE}",
            tool_calls=[write],
            tool_results=[ToolResult(tool_call_id="c0", name="Write", output="Created", metadata={"diff": DIFF})],
        ),
        Turn(
            index=1,
            content="",
            tool_calls=[bash],
            tool_results=[ToolResult(tool_call_id="c1", name="Bash", output=HOSTILE, is_error=True)],
            verdicts=[verdict],
        ),
    ]
    with TrajectoryWriter(path, "examples/relu", "replay", prompt) as writer:
        for turn in turns:
            writer.append(turn)
        writer.finish({**verdict, "verdict": "pass", "reward": 3, "message": ""}, 3, "Submitted", terminated=True)
    return path


def test_cli_writes_an_escaped_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trajectory = write_trajectory(tmp_path / "t.jsonl")
    assert main(["view", str(trajectory), "-o", str(tmp_path / "out" / "page.html")]) == 0
    page = (tmp_path / "out" / "page.html").read_text()
    assert capsys.readouterr().out.strip() == str(tmp_path / "out" / "page.html")
    assert "<script" not in page and "&lt;script&gt;window.pwned" in page
    assert '<span class="add">+__global__ void relu() {}</span>' in page
    assert main(["view", str(tmp_path / "missing.jsonl")]) == 2


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if path := shutil.which(name):
            return path
    return None


def test_page_renders_in_a_headless_browser(tmp_path: Path) -> None:
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')"
    )
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium on PATH (apt-get install -y chromium); playwright's own browser download is not used")
    page_path = tmp_path / "page.html"
    page_path.write_text(render_html(read_trajectory(write_trajectory(tmp_path / "t.jsonl"))))
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto(page_path.as_uri())
            assert page.title() == "examples/relu · cuda-agent"
            assert page.locator("section.turn").count() == 2
            assert page.locator("#turn-0 .diff .add").inner_text() == "+__global__ void relu() {}"
            assert page.locator("#turn-1 .call.error .tag.error").inner_text() == "error"
            assert HOSTILE in page.locator("#turn-1 pre.output").inner_text()
            assert page.evaluate("window.pwned") is None
            assert page.locator(".final .tag.pass").inner_text() == "pass"
        finally:
            browser.close()
