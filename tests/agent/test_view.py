"""`cuda-agent view`: the HTML page of an episode, escaped, checked in a real headless Chromium."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.agent.trajectory import TrajectoryWriter, read_trajectory
from cuda_agent.agent.view import render_html
from cuda_agent.types import ToolCall, ToolResult, Turn, Verdict
from tests.user import browser_page, cli

HOSTILE = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
KERNEL = (
    "#include <cuda_runtime.h>\n\n"
    "__global__ void relu_kernel(const float* x, float* y, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;  // a < b && c > d\n"
    "}\n"
)
NEW_FILE_DIFF = "--- a/kernels/relu.cu\n+++ b/kernels/relu.cu\n@@ -0,0 +1,6 @@\n" + "".join(
    f"+{line}\n" for line in KERNEL.splitlines()
)
EDIT_DIFF = (
    "--- a/kernels/relu.cu\n+++ b/kernels/relu.cu\n@@ -5 +5 @@\n"
    "-    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;  // a < b && c > d\n"
    "+    if (i < n) y[i] = fmaxf(x[i], 0.f);\n"
)


def write_trajectory(path: Path) -> Path:
    prompt = [{"role": "system", "content": "skill"}, {"role": "user", "content": "Write a ReLU kernel."}]
    write = ToolCall(id="c0", name="Write", arguments=json.dumps({"path": "kernels/relu.cu", "content": KERNEL}))
    edit = {"path": "kernels/relu.cu", "old_string": "x[i] > 0.f ? x[i] : 0.f", "new_string": "fmaxf(x[i], 0.f)"}
    refused = {"path": "kernels/relu.cu", "old_string": "int n)", "new_string": "long n)"}
    bash = ToolCall(id="c1", name="Bash", arguments='{"command": "python -m utils.verification"}')
    verdict = {"task": "examples/relu", "verdict": "incorrect", "reward": -1, "correct": False, "message": HOSTILE}
    turns = [
        Turn(
            index=0,
            content=f"I will write a kernel. {HOSTILE}",
            tool_calls=[write],
            tool_results=[
                ToolResult(tool_call_id="c0", name="Write", output="Created", metadata={"diff": NEW_FILE_DIFF})
            ],
        ),
        Turn(
            index=1,
            content="",
            tool_calls=[bash],
            tool_results=[ToolResult(tool_call_id="c1", name="Bash", output=HOSTILE, is_error=True)],
            verdicts=[Verdict.model_validate(verdict)],
        ),
        Turn(
            index=2,
            content="Simpler with fmaxf.",
            tool_calls=[
                ToolCall(id="c2", name="Edit", arguments=json.dumps(edit)),
                ToolCall(id="c3", name="Edit", arguments=json.dumps(refused)),
            ],
            tool_results=[
                ToolResult(tool_call_id="c2", name="Edit", output="Edited", metadata={"diff": EDIT_DIFF}),
                ToolResult(tool_call_id="c3", name="Edit", output="'old_string' was not found", is_error=True),
            ],
        ),
    ]
    with TrajectoryWriter(path, "examples/relu", "replay", prompt) as writer:
        for turn in turns:
            writer.append(turn)
        final = Verdict.model_validate({**verdict, "verdict": "pass", "reward": 3, "message": ""})
        writer.finish(final, 3, "finished", terminated=True)
    return path


def test_cli_writes_an_escaped_page(tmp_path: Path) -> None:
    trajectory = write_trajectory(tmp_path / "t.jsonl")
    done = cli("view", str(trajectory), "-o", str(tmp_path / "out" / "page.html"))
    page = (tmp_path / "out" / "page.html").read_text()
    assert done.returncode == 0 and done.stdout.strip() == str(tmp_path / "out" / "page.html")
    assert "<script" not in page and "&lt;script&gt;window.pwned" in page
    # The written kernel is code, one line per line, not a JSON string with \\n escapes.
    assert '<span class="ln">__global__ void relu_kernel(const float* x, float* y, int n) {</span>' in page
    assert "\\n" not in page and "&amp;&amp; c &gt; d" in page
    assert '<span class="add">+    if (i &lt; n) y[i] = fmaxf(x[i], 0.f);</span>' in page
    # A refused Edit shows what it asked for (no file changed, so no file diff exists).
    assert '<span class="del">-int n)</span><span class="add">+long n)</span>' in page
    assert '<pre class="command">$ python -m utils.verification</pre>' in page


@pytest.mark.parametrize(("content", "why"), [(bytes(range(256)) * 8, "is not a text file"), (b"[1, 2]\n", "header")])
def test_view_of_a_file_that_is_no_trajectory_is_one_line(tmp_path: Path, content: bytes, why: str) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(content)
    done = cli("view", str(junk))
    assert done.returncode == 2 and why in done.stderr
    assert done.stderr.startswith("error: ") and len(done.stderr.splitlines()) == 1
    assert cli("view", str(tmp_path / "missing.jsonl")).returncode == 2


def test_page_renders_in_a_headless_browser(tmp_path: Path) -> None:
    page_path = tmp_path / "page.html"
    page_path.write_text(render_html(read_trajectory(write_trajectory(tmp_path / "t.jsonl"))))
    with browser_page() as page:
        page.goto(page_path.as_uri())
        assert page.title() == "examples/relu · cuda-agent"
        assert page.locator("section.turn").count() == 3
        code = page.locator("#turn-0 pre.code")
        assert code.locator(".ln").count() == len(KERNEL.splitlines())
        assert code.inner_text().splitlines() == KERNEL.splitlines()  # line numbers are drawn, not copied
        assert page.locator("#turn-2 .diff .add").first.inner_text() == "+    if (i < n) y[i] = fmaxf(x[i], 0.f);"
        assert page.locator("#turn-1 .call.error .tag.error").inner_text() == "error"
        assert HOSTILE in page.locator("#turn-1 pre.output").inner_text()
        assert page.evaluate("window.pwned") is None
        assert page.locator(".final .tag.pass").inner_text() == "pass"
        # For a person to look at (the test run keeps it under pytest's tmp folder).
        page.screenshot(path=str(tmp_path / "view.png"), full_page=True)


def test_an_episode_without_a_verdict_says_the_failure_was_ours(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TrajectoryWriter(path, "examples/relu", "replay", [{"role": "user", "content": "go"}]) as writer:
        writer.finish(exit_status="finished", terminated=True, judge_error="JudgeInfraError: <out of memory>")
    page = render_html(read_trajectory(path))
    assert "none: JudgeInfraError: &lt;out of memory&gt; (our failure, not the candidate's)" in page


def test_the_verdict_reads_as_figures_not_raw_values(tmp_path: Path) -> None:
    """Speed-ups and times at 4 significant digits, one time per line, and no "finish: None" on a turn."""
    verdict = Verdict.model_validate(
        {
            "task": "examples/relu",
            "verdict": "pass",
            "reward": 3,
            "correct": True,
            "speedup_vs_eager": 1.1515497782886535,
            "timings_ms": {"solution": 0.09521234, "eager": 0.10964, "compile": None},
        }
    )
    turn = Turn(index=0, content="done", verdicts=[verdict])
    with TrajectoryWriter(tmp_path / "t.jsonl", "examples/relu", "replay", []) as writer:
        writer.append(turn)
        writer.finish(verdict, 3, "finished", terminated=True)
    page = render_html(read_trajectory(tmp_path / "t.jsonl"))
    assert "1.152x" in page and "1.1515497782886535" not in page
    assert "solution: 0.09521 ms<br>eager: 0.1096 ms<br>compile: - ms" not in page
    assert "solution: 0.09521 ms<br>eager: 0.1096 ms<br>compile: -" in page and "{" not in page.split("<body>")[1]
    assert "finish: None" not in page
