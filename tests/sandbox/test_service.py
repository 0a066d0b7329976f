"""`cuda-agent serve` as a user runs it, driven through the package's client."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuda_agent.cli import main
from cuda_agent.errors import SandboxError
from cuda_agent.sandbox.client import SandboxClient
from tests.sandbox.helpers import FAST, RELU

TOKEN = "test-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def service():
    port = free_port()
    cmd = [sys.executable, "-m", "cuda_agent", "serve", "--port", str(port), "--token", TOKEN, "--workers", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    with SandboxClient(url, token=TOKEN) as client:
        for _ in range(100):
            try:
                client.health()
                break
            except SandboxError:
                assert proc.poll() is None, proc.stderr.read()
                time.sleep(0.2)
        yield url, client
    proc.terminate()
    proc.wait(timeout=30)


def test_serve_refuses_a_public_address_without_token(capsys: pytest.CaptureFixture) -> None:
    assert main(["serve", "--host", "0.0.0.0"]) == 2
    assert "without a token" in capsys.readouterr().err


def test_service_judges_runs_commands_and_counts(service, tmp_path: Path) -> None:
    _url, client = service
    assert client.health()["status"] == "ok"
    verdict = client.judge("examples/relu", RELU, config=FAST)
    assert (verdict.verdict, verdict.reward, verdict.task) == ("pass", 1, "examples/relu")
    tmp_path.chmod(0o755)
    result = client.run_command(["bash", "-c", "echo served; exit 2"], cwd=str(tmp_path), timeout_s=30)
    assert (result.exit_code, result.stdout) == (2, "served\n")
    metrics = client.metrics()
    assert metrics.completed == 2 and metrics.by_verdict == {"pass": 1} and metrics.queue_depth == 0
    assert metrics.latency_s["p50"] > 0


def test_service_requires_the_token_and_reports_bad_input(service) -> None:
    url, client = service
    with SandboxClient(url) as anonymous:
        assert anonymous.health()["status"] == "ok"  # health stays open for load balancers
        with pytest.raises(SandboxError, match="401"):
            anonymous.judge("examples/relu", RELU)
    with pytest.raises(SandboxError, match="422.*no task"):
        client.judge("examples/no_such_task", RELU, config=FAST)


def test_workspace_verification_is_judged_by_the_service_when_one_is_named(service, tmp_path: Path) -> None:
    import os
    import shutil

    from cuda_agent.agent.tools.bash import agent_env
    from cuda_agent.tasks import Catalog
    from cuda_agent.workspace import create_workspace

    url, client = service
    solution = Path(__file__).resolve().parents[2] / "solutions" / "workspaces" / "examples_relu_cpu"
    tmp_path.chmod(0o755)  # the service's job processes read the folder (as nobody when run as root)
    root = create_workspace(Catalog().resolve("examples/relu"), tmp_path / "ws", device="cpu")
    for kernel in (solution / "kernels").iterdir():
        shutil.copyfile(kernel, root / "kernels" / kernel.name)
    shutil.copyfile(solution / "model_new.py", root / "model_new.py")
    before = client.metrics().completed
    env = {**os.environ, "CUDA_AGENT_SANDBOX_URL": url, "CUDA_AGENT_SANDBOX_TOKEN": TOKEN}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    assert agent_env({"CUDA_AGENT_SANDBOX_TOKEN": TOKEN})["CUDA_AGENT_SANDBOX_TOKEN"] == TOKEN  # the shell keeps it
    run = subprocess.run(
        [sys.executable, "-m", "utils.verification"], cwd=root, env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0 and run.stdout.splitlines()[-1] == "verification: PASS", run.stdout + run.stderr
    assert client.metrics().completed == before + 1  # judged there, not here
    env["CUDA_AGENT_SANDBOX_TOKEN"] = "wrong"
    refused = subprocess.run(
        [sys.executable, "-m", "utils.verification"], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    assert refused.returncode == 1 and "Traceback" not in refused.stderr and "verification:" in refused.stdout
