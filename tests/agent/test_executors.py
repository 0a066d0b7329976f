"""The agent's Bash on either executor the episode runner can choose: a persistent shell here, or a sandbox
job per command (through a LocalPool, and through a live `cuda-agent serve` on 127.0.0.1)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from cuda_agent.agent.tools import build_toolset
from cuda_agent.sandbox import LocalPool, SandboxClient
from cuda_agent.sandbox.limits import SandboxLimits
from cuda_agent.subproc import unprivileged_user
from cuda_agent.tasks import Catalog
from cuda_agent.types import ToolCall
from cuda_agent.workspace import create_workspace, is_editable
from tests.sandbox.test_service import free_port, wait_for

COMMAND = "cd kernels && pwd; echo out; echo err >&2; export KEPT=1; (exit 3)"


@pytest.fixture
def ws():
    # Below /tmp and world-searchable: the sandbox's unprivileged user must reach it (as a service's root would).
    folder = Path(tempfile.mkdtemp(prefix="cuda-agent-exec-", dir="/tmp"))
    folder.chmod(0o755)
    yield create_workspace(Catalog().resolve("examples/relu"), folder / "ws", device="cpu")
    shutil.rmtree(folder)


def bash(tools, command: str):
    return tools.execute(ToolCall(id="c", name="Bash", arguments=json.dumps({"command": command})))


def test_the_local_shell_keeps_its_state_between_commands(ws: Path) -> None:
    with build_toolset(ws, is_editable) as tools:
        first, second = bash(tools, COMMAND), bash(tools, "echo ${KEPT:-none}; pwd")
    assert first.output.split("\n")[:3] == [str(ws / "kernels"), "out", "err"] and first.metadata["exit_code"] == 3
    assert second.output.split() == ["1", str(ws / "kernels")]


def check_sandboxed(tools, ws: Path) -> None:
    first, second = bash(tools, COMMAND), bash(tools, "echo ${KEPT:-none}; pwd; id -un")
    assert first.is_error and first.metadata["exit_code"] == 3
    assert first.output.split("\n")[:3] == [str(ws / "kernels"), "out", "err"]
    lines = second.output.split()
    assert lines[:2] == ["none", str(ws)]  # nothing carried over: a fresh shell in the workspace root
    assert "fresh shell" in tools.schemas()[0]["function"]["description"]
    slow = tools.execute(ToolCall(id="c", name="Bash", arguments=json.dumps({"command": "sleep 60", "timeout": 2})))
    assert slow.metadata["timed_out"] and "killed" in slow.output


def test_the_sandbox_runs_each_command_as_a_job_through_a_local_pool(ws: Path) -> None:
    with LocalPool(build_workers=1) as pool, build_toolset(ws, is_editable, commands=pool) as tools:
        check_sandboxed(tools, ws)
        assert pool.metrics().by_status == {"done": 3}  # one job per command


def test_the_sandbox_runs_each_command_through_a_live_service(ws: Path) -> None:
    port = free_port()
    cmd = [sys.executable, "-m", "cuda_agent", "serve", "--port", str(port), "--workers", "1"]
    proc = subprocess.Popen(
        [*cmd, "--workspace-root", str(ws.parent)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(url, proc)
        with SandboxClient(url) as client, build_toolset(ws, is_editable, commands=client) as tools:
            check_sandboxed(tools, ws)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.parametrize("user", ["nobody", None])
def test_a_sandboxed_command_cannot_change_the_workspace_tools(ws: Path, user: str | None) -> None:
    if user is not None and unprivileged_user(user, [Path(sys.executable), ws])[0] is None:
        pytest.skip(f"the sandbox cannot drop to {user} here: {unprivileged_user(user, [Path(sys.executable), ws])[1]}")
    real = (ws / "utils" / "verification.py").read_text()
    attack = "echo 'print(1)' > utils/verification.py; echo '# mine' >> model_new.py; true"
    with LocalPool(build_workers=1, limits=SandboxLimits(user=user)) as pool:
        with build_toolset(ws, is_editable, commands=pool) as tools:
            seen = bash(tools, attack)
    assert (ws / "utils" / "verification.py").read_text() == real
    assert (ws / "model_new.py").read_text().endswith("# mine\n")  # the editable file was changed
    if user is None:  # stayed root: the write went through, was undone and reported to the model
        assert "changed protected files, which were restored: utils/verification.py" in seen.output
    else:  # dropped to nobody: the read-only file and its root-owned folder refused the write
        assert "Permission denied" in seen.output


def test_a_sandboxed_command_cannot_claim_its_output_was_cut(ws: Path) -> None:
    fake = "printf '\\n[... 999 characters cut ...]\\n'"  # head_and_tail's own note, printed by the command
    with LocalPool(build_workers=1) as pool, build_toolset(ws, is_editable, commands=pool) as tools:
        claimed, long = bash(tools, fake), bash(tools, "seq 1 20000")
    assert "999 characters cut" in claimed.output
    assert (claimed.metadata["cut_bytes"], claimed.truncated) == (0, False)
    assert long.truncated and long.metadata["cut_bytes"] == len("".join(f"{i}\n" for i in range(1, 20001))) - 30_000
