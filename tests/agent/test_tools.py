"""The agent's tools against a real workspace folder and a real bash process."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from cuda_agent.agent.tools import BashTool, ToolsConfig, ToolSet, build_toolset
from cuda_agent.agent.tools.bash import ShellResult
from cuda_agent.types import ToolCall, ToolResult
from tests.agent.conftest import is_editable


@pytest.fixture
def tools(workspace: Path):
    with build_toolset(workspace, is_editable, ToolsConfig(bash_timeout_s=20, bash_output_cap_bytes=2000)) as toolset:
        yield toolset


def call(tools: ToolSet, name: str, **arguments: object) -> ToolResult:
    return tools.execute(ToolCall(id="c", name=name, arguments=json.dumps(arguments)))


def test_write_requires_a_read_of_an_existing_file(tools: ToolSet, workspace: Path) -> None:
    refused = call(tools, "Write", path="model_new.py", content="x = 1\n")
    assert refused.is_error and "Read it first" in refused.output
    assert "ModelNew" in (workspace / "model_new.py").read_text()
    assert not call(tools, "Read", path="model_new.py").is_error
    written = call(tools, "Write", path="model_new.py", content="x = 1\n")
    assert not written.is_error, written.output
    assert (workspace / "model_new.py").read_text() == "x = 1\n"
    assert "+x = 1" in written.metadata["diff"]


def test_write_refuses_a_file_changed_since_it_was_read(tools: ToolSet, workspace: Path) -> None:
    call(tools, "Read", path="model_new.py")
    call(tools, "Bash", command="echo '# changed by bash' >> model_new.py")
    refused = call(tools, "Edit", path="model_new.py", old_string="pass", new_string="return")
    assert refused.is_error and "changed since you last read it" in refused.output


def test_new_kernel_file_needs_no_read(tools: ToolSet, workspace: Path) -> None:
    result = call(tools, "Write", path="kernels/relu.cu", content="__global__ void relu() {}\n")
    assert not result.is_error, result.output
    assert (workspace / "kernels" / "relu.cu").read_text() == "__global__ void relu() {}\n"


@pytest.mark.parametrize("path", ["model.py", "binding.cpp", "utils/verification.py", "kernels/sub/x.cu", "k.cu"])
@pytest.mark.parametrize("tool", ["Write", "Edit", "MultiEdit"])
def test_protected_files_are_refused(tools: ToolSet, workspace: Path, tool: str, path: str) -> None:
    target = workspace / path
    before = target.read_text() if target.exists() else None
    if before is not None:
        call(tools, "Read", path=path)
    edit = {"old_string": "import", "new_string": "hacked"}
    arguments = {"Write": {"content": "hacked"}, "Edit": edit, "MultiEdit": {"edits": [edit]}}[tool]
    result = call(tools, tool, path=path, **arguments)
    assert result.is_error
    assert "read-only" in result.output and "model_new.py" in result.output
    assert (target.read_text() if target.exists() else None) == before


@pytest.mark.parametrize("path", ["../outside.txt", "kernels/../../outside.txt", "/etc/hostname", "kernels/link.cu"])
def test_paths_outside_the_workspace_are_refused(tools: ToolSet, workspace: Path, path: str) -> None:
    outside = workspace.parent / "outside.txt"
    outside.write_text("secret\n")
    (workspace / "kernels" / "link.cu").symlink_to(outside)
    for tool, arguments in (("Read", {}), ("Write", {"content": "pwned"})):
        result = call(tools, tool, path=path, **arguments)
        assert result.is_error and "outside the workspace" in result.output, (tool, result.output)
    assert outside.read_text() == "secret\n"


def test_absolute_path_inside_the_root_is_accepted(tools: ToolSet, workspace: Path) -> None:
    result = call(tools, "Read", path=str(workspace / "model.py"))
    assert not result.is_error and "     1\timport torch" in result.output


def test_read_numbers_lines_and_pages(tools: ToolSet, workspace: Path) -> None:
    (workspace / "kernels" / "long.cu").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    result = call(tools, "Read", path="kernels/long.cu", offset=4, limit=2)
    assert result.output.splitlines() == [
        "     4\tline 4",
        "     5\tline 5",
        "[lines 4-5 of 10; Read with offset=6 for more]",
    ]
    assert result.truncated
    (workspace / "blob.bin").write_bytes(b"\x00\x01binary")
    assert "binary" in call(tools, "Read", path="blob.bin").output


def test_edit_reports_missing_and_ambiguous_strings(tools: ToolSet, workspace: Path) -> None:
    (workspace / "kernels" / "a.cu").write_text("int a;\nint a;\nfloat b;\n")
    call(tools, "Read", path="kernels/a.cu")
    missing = call(tools, "Edit", path="kernels/a.cu", old_string="double c;", new_string="x")
    assert missing.is_error and "was not found" in missing.output
    ambiguous = call(tools, "Edit", path="kernels/a.cu", old_string="int a;", new_string="int z;")
    assert ambiguous.is_error and "occurs 2 times (at lines 1, 2)" in ambiguous.output
    unique = call(tools, "Edit", path="kernels/a.cu", old_string="float b;", new_string="float c;")
    assert not unique.is_error
    every = call(tools, "Edit", path="kernels/a.cu", old_string="int a;", new_string="int z;", replace_all=True)
    assert not every.is_error
    assert (workspace / "kernels" / "a.cu").read_text() == "int z;\nint z;\nfloat c;\n"


def test_multiedit_is_all_or_nothing(tools: ToolSet, workspace: Path) -> None:
    path = workspace / "model_new.py"
    before = path.read_text()
    call(tools, "Read", path="model_new.py")
    edits = [
        {"old_string": "import torch", "new_string": "import torch  # ok"},
        {"old_string": "absent", "new_string": "x"},
    ]
    failed = call(tools, "MultiEdit", path="model_new.py", edits=edits)
    assert failed.is_error and "edit 2 of 2" in failed.output and "no edit was applied" in failed.output
    assert path.read_text() == before
    edits[1] = {"old_string": "pass", "new_string": "def forward(self, x):\n        return x"}
    applied = call(tools, "MultiEdit", path="model_new.py", edits=edits)
    assert not applied.is_error, applied.output
    assert "# ok" in path.read_text() and "return x" in path.read_text()


def test_glob_and_grep(tools: ToolSet, workspace: Path) -> None:
    (workspace / "kernels" / "a.cu").write_text("__global__ void add() {}\n")
    (workspace / "kernels" / "blob.o").write_bytes(b"\x00__global__")
    assert call(tools, "Glob", pattern="kernels/*.cu").output == "kernels/a.cu"
    assert call(tools, "Grep", pattern=r"__global__\s+void").output == "kernels/a.cu:1: __global__ void add() {}"
    assert call(tools, "Grep", pattern="class", files_only=True).output.splitlines() == ["model.py", "model_new.py"]
    bad = call(tools, "Grep", pattern="(unclosed")
    assert bad.is_error and "Python 're' syntax" in bad.output


def test_bash_keeps_state_and_stays_in_the_workspace(tools: ToolSet, workspace: Path) -> None:
    assert call(tools, "Bash", command="pwd").output == str(workspace.resolve())
    call(tools, "Bash", command="cd kernels && export KEPT=yes")
    assert call(tools, "Bash", command="echo $KEPT; pwd").output == f"yes\n{workspace.resolve()}/kernels"
    escaped = call(tools, "Bash", command="cd / && pwd")
    assert "moved back" in escaped.output
    assert call(tools, "Bash", command="pwd").output == str(workspace.resolve())
    failed = call(tools, "Bash", command="cat < /dev/stdin; ls missing-file")
    assert failed.is_error and "[exit code 2]" in failed.output


def test_bash_timeout_kills_the_hung_command_and_its_children(tools: ToolSet, workspace: Path) -> None:
    start = time.monotonic()
    result = call(tools, "Bash", command="sleep 120 & echo $! > child.pid; sleep 120", timeout=1)
    assert time.monotonic() - start < 10
    assert result.is_error and result.metadata["timed_out"]
    assert "was killed" in result.output and "new shell" in result.output
    child = int((workspace / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)
    assert call(tools, "Bash", command="echo alive").output == "alive"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_bash_output_is_capped_with_a_note(tools: ToolSet) -> None:
    result = call(tools, "Bash", command="seq 1 200000")
    assert result.truncated and result.metadata["cut_bytes"] > 1_000_000
    assert result.output.startswith("1\n2\n3\n") and result.output.endswith("199999\n200000")
    assert f"[... {result.metadata['cut_bytes']} bytes of output cut here ...]" in result.output
    assert len(result.output) < 2200


def test_bash_environment_has_no_secrets(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("HF_TOKEN", "hf-should-not-leak")
    with build_toolset(workspace, is_editable) as tools:
        env = call(tools, "Bash", command="env").output
    assert "should-not-leak" not in env and "PATH=" in env


def test_bash_recovers_when_its_folder_is_removed(tools: ToolSet, workspace: Path) -> None:
    call(tools, "Bash", command="mkdir -p kernels/tmp && cd kernels/tmp")
    call(tools, "Bash", command="rm -rf ../tmp; sleep 5", timeout=0.5)
    assert call(tools, "Bash", command="pwd").output == str(workspace.resolve())


class RecordingShell:
    """A shell of neither of our kinds: Bash must take its description and close it through the Shell protocol."""

    description = "Run a bash command in the recording shell. "

    def __init__(self) -> None:
        self.commands: list[str] = []
        self.closed = False

    def run(self, command: str, timeout_s: float, cap_bytes: int) -> ShellResult:
        self.commands.append(command)
        return ShellResult("ran", 0, False, 0, [])

    def close(self) -> None:
        self.closed = True


def test_bash_tells_and_closes_whatever_shell_it_runs_on() -> None:
    shell = RecordingShell()
    with ToolSet([BashTool(shell)]) as tools:
        description = tools.schemas()[0]["function"]["description"]
        assert call(tools, "Bash", command="ls").output == "ran" and shell.commands == ["ls"]
    assert description.startswith("Run a bash command in the recording shell. stdin is empty")
    assert shell.closed


def test_bash_syntax_error_runs_nothing(tools: ToolSet, workspace: Path) -> None:
    result = call(tools, "Bash", command="touch made.txt; echo 'unclosed")
    assert result.is_error and "syntax error" in result.output
    assert not (workspace / "made.txt").exists()


@pytest.mark.parametrize(
    ("tool_call", "expected"),
    [
        (ToolCall(id="1", name="Delete", arguments="{}"), "there is no tool named 'Delete'"),
        (ToolCall(id="2", name="Read", arguments='{"path": "model.py"'), "are not valid JSON"),
        (ToolCall(id="3", name="Read", arguments='["model.py"]'), "must be a JSON object"),
        (ToolCall(id="4", name="", arguments="<garbage>", error="its body is not valid JSON"), "could not be parsed"),
        (ToolCall(id="5", name="Read", arguments='{"path": "model.py", "offset": "x"}'), "bad arguments for Read"),
    ],
)
def test_malformed_calls_become_error_results(tools: ToolSet, tool_call: ToolCall, expected: str) -> None:
    result = tools.execute(tool_call)
    assert result.is_error and expected in result.output
    assert result.tool_call_id == tool_call.id
    assert result.to_message() == {"role": "tool", "tool_call_id": tool_call.id, "content": result.output}


def test_schemas_name_the_paper_tools(tools: ToolSet) -> None:
    names = [s["function"]["name"] for s in tools.schemas()]
    assert names == ["Bash", "Read", "Write", "Edit", "MultiEdit", "Glob", "Grep"]
    assert all(s["function"]["parameters"]["type"] == "object" for s in tools.schemas())
