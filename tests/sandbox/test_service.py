"""`cuda-agent serve` as a user runs it, driven through the package's client."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from cuda_agent.cli import main
from cuda_agent.errors import ConfigError, SandboxError
from cuda_agent.sandbox.client import SandboxClient
from cuda_agent.types import Verdict
from tests.sandbox.helpers import FAST, RELU
from tests.user import guide_block

VERDICTS = set(Verdict.model_fields["verdict"].annotation.__args__)

TOKEN = "test-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, proc: subprocess.Popen) -> None:
    with SandboxClient(url) as client:
        for _ in range(150):
            try:
                client.health()
                return
            except SandboxError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else proc.returncode
                time.sleep(0.2)
    raise AssertionError(f"{url} did not answer /health within 30 s")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory):
    port = free_port()
    # Every test's tmp_path lies below the base folder: the service may read workspaces there, nowhere else.
    root = str(tmp_path_factory.getbasetemp())
    cmd = [sys.executable, "-m", "cuda_agent", "serve", "--port", str(port), "--token", TOKEN, "--workers", "2"]
    proc = subprocess.Popen(
        cmd + ["--workspace-root", root], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    url = f"http://127.0.0.1:{port}"
    wait_for(url, proc)
    with SandboxClient(url, token=TOKEN) as client:
        yield url, client
    proc.terminate()
    proc.wait(timeout=30)


def test_serve_refuses_a_public_address_without_token(capsys: pytest.CaptureFixture) -> None:
    assert main(["serve", "--host", "0.0.0.0"]) == 2
    assert "without a token" in capsys.readouterr().err


def test_serve_help_says_health_needs_no_token(capsys: pytest.CaptureFixture) -> None:
    """Issue 41: `--token` said every request needs it, but GET /health answers without one (by design, for load
    balancers: the token test below checks that it does)."""
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "Bearer TOKEN' on every request but GET /health, which stays open" in text


@pytest.mark.parametrize("port", ["99999", "-1"])
def test_serve_refuses_a_port_out_of_range_in_one_line(port: str, capsys: pytest.CaptureFixture) -> None:
    """Issue 41: `--port 99999` printed the URL, then uvicorn's OverflowError."""
    assert main(["serve", "--port", port]) == 2
    err = capsys.readouterr().err
    assert err == f"error: --port {port}: give a port from 1 to 65535 (0: any free one)\n"


@pytest.mark.parametrize("flag", ["--spares", "--prepare-spares"])
def test_serve_refuses_a_negative_spare_count(flag: str, capsys: pytest.CaptureFixture) -> None:
    assert main(["serve", flag, "-1"]) == 2
    err = capsys.readouterr().err
    assert f"{flag} -1" in err and len(err.splitlines()) == 1


def test_serve_creates_a_missing_workspace_root_and_refuses_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    root, port = tmp_path / "runs" / "episodes", free_port()
    cmd = [sys.executable, "-m", "cuda_agent", "serve", "--port", str(port), "--workers", "1"]
    proc = subprocess.Popen(cmd + ["--workspace-root", str(root)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(f"http://127.0.0.1:{port}", proc)
        assert root.is_dir()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    (tmp_path / "a-file").write_text("")
    assert main(["serve", "--port", str(port), "--workspace-root", str(tmp_path / "a-file")]) == 2
    err = capsys.readouterr().err
    assert f"--workspace-root {tmp_path / 'a-file'}: not a folder" in err and len(err.splitlines()) == 1


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
        with pytest.raises(ConfigError, match="401"):  # the request's fault: not one of our failures
            anonymous.judge("examples/relu", RELU)
    refused = httpx.post(f"{url}/judge", json={"task": "examples/relu", "solution": RELU}, timeout=30)
    assert (refused.status_code, refused.json()["error_type"]) == (401, "ConfigError")
    with pytest.raises(ConfigError, match="422.*no task"):
        client.judge("examples/no_such_task", RELU, config=FAST)


@pytest.mark.slow
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


def readme_service_block(fence: str) -> str:
    """The first ```bash or ```python block of the service's guide page (docs/sandbox-and-service.md), as written."""
    return guide_block("docs/sandbox-and-service.md", fence)


def readme_service_lines() -> list[str]:
    """The shell lines of the guide's service example (continuations joined), as a user would paste them."""
    return [line for line in readme_service_block("bash").replace("\\\n", " ").splitlines() if line.strip()]


def test_readme_service_example_runs_as_written(tmp_path: Path) -> None:
    lines = readme_service_lines()
    serve = next(line for line in lines if line.startswith("cuda-agent serve"))
    port = free_port()
    # As written, except the port (8000 may be taken on a shared machine) and that the server runs in the background
    # of this test rather than of the user's shell (`&`).
    lines = [line.replace("8000", str(port)) for line in lines]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    tmp_path.chmod(0o755)
    done = [subprocess.run(["bash", "-c", lines[0]], cwd=tmp_path, env=env, capture_output=True, text=True)]
    assert done[0].returncode == 0, done[0].stderr
    command = serve.replace("8000", str(port)).split("#")[0].strip().removesuffix("&")
    proc = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(f"http://127.0.0.1:{port}", proc)
        for line in lines[2:]:
            run = subprocess.run(
                ["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
            )
            verdict = json.loads(run.stdout)
            assert run.returncode == 0 and verdict["task"] == "examples/relu", run.stdout + run.stderr
            assert verdict["verdict"] in VERDICTS and verdict["reward"] == -1  # neither is a working relu
        client = subprocess.run(  # the Python client example, as written but for the port
            [sys.executable, "-c", readme_service_block("python").replace("8000", str(port))],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert client.returncode == 0, client.stderr
        printed = [line.split() for line in client.stdout.splitlines()]
        assert len(printed) == 2 and all(v in VERDICTS and r == "-1" for v, r in printed), client.stdout
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert len(lines) == 4 and lines[1].startswith("cuda-agent serve")


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ('{"task": "examples/relu"}', 422, "give exactly one of 'solution' (source text) and 'workspace'"),
        ('{"task": "examples/relu", "solution": ""}', 422, "solution: String should have at least 1 character"),
        ('{"task": "examples/relu", "solution": "x", "workspace": "w"}', 422, "give exactly one of"),
        ("task=examples/relu", 422, "the body is not JSON"),
        ('{"task": "examples/relu", "solution": "x", "colour": 1}', 422, "colour: Extra inputs are not permitted"),
        ('{"task": "examples/nope", "solution": "x"}', 422, "task: no task 'examples/nope'"),
        ('{"task": "examples/relu", "solution": "x", "config": {"trials": "many"}}', 422, "config: trials:"),
        ('{"task": "examples/relu", "workspace": "/etc"}', 403, "workspace '/etc' is outside the workspace root"),
        ('{"task": "examples/relu", "workspace": "../../.."}', 403, "is outside the workspace root"),
        ('{"task": "examples/relu", "workspace": "no/such/ws"}', 404, "workspace 'no/such/ws': no such file or folder"),
        ('{"task": "/etc/passwd", "solution": "x"}', 403, "task '/etc/passwd' is outside the workspace root"),
        ('{"task": "examples/../../../../../etc/passwd", "solution": "x"}', 403, "is outside the workspace root"),
    ],
)
def test_client_mistakes_get_4xx_and_one_line(service, body: str, status: int, says: str) -> None:
    url, _client = service
    # A form content type, as `curl -d` sends by default: the body is read as JSON anyway.
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/x-www-form-urlencoded"}
    response = httpx.post(f"{url}/judge", content=body, headers=headers, timeout=60)
    assert response.status_code == status and response.json()["error_type"] == "ConfigError"
    error = response.json()["error"]
    assert says in error and "\n" not in error


def test_command_folders_must_be_below_the_root(service) -> None:
    _url, client = service
    with pytest.raises(ConfigError, match="403.*cwd '/' is outside the workspace root"):
        client.run_command(["ls"], cwd="/", timeout_s=10)


def test_a_one_line_solution_is_source_text(service) -> None:
    _url, client = service
    verdict = client.judge("examples/relu", "class ModelNew: pass", config=FAST)
    assert verdict.verdict != "pass" and verdict.reward == -1  # judged as code (the 500), not read as a path


def test_a_full_queue_is_a_503_naming_the_pools_own_error() -> None:
    from fastapi.testclient import TestClient

    from cuda_agent.sandbox.jobs import error_class
    from cuda_agent.sandbox.local import LocalPool
    from cuda_agent.sandbox.service import create_app

    with LocalPool(build_workers=1, max_pending=0) as pool, TestClient(create_app(pool)) as http:
        response = http.post("/judge", json={"task": "examples/relu", "solution": RELU, "config": FAST})
    assert response.status_code == 503 and response.headers["Retry-After"] == "5"
    body = response.json()
    assert "queue is full" in body["error"]
    # What SandboxClient raises for it (test_paths.py shows the mapping end to end): the class LocalPool.submit raises.
    assert error_class(body["error_type"]).__name__ == "PoolFullError"


def test_device_cuda_on_a_pool_without_gpus_is_refused_at_once() -> None:
    """Issue 41: it was a 503 JudgeInfraError after 36 s (ours, retryable: RL would drop it); the CLI refuses the
    same at once. Now a 422 before anything is built."""
    from fastapi.testclient import TestClient

    from cuda_agent.sandbox.local import LocalPool
    from cuda_agent.sandbox.service import create_app

    start = time.monotonic()
    with LocalPool(build_workers=1, gpus=[]) as pool, TestClient(create_app(pool)) as http:
        config = {**FAST, "device": "cuda"}
        response = http.post("/judge", json={"id": "g", "task": "examples/relu", "solution": RELU, "config": config})
        assert pool.metrics().submitted == 0
    assert time.monotonic() - start < 10 and response.status_code == 422
    assert response.json() == {
        "error": "job g asks for device cuda, but this pool has no GPU: use device cpu or auto, or a service on a "
        "GPU machine",
        "error_type": "ConfigError",
    }


def test_a_job_the_pool_refuses_as_the_callers_mistake_is_a_422_not_ours(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from cuda_agent.sandbox.jobs import CommandJob
    from cuda_agent.sandbox.local import LocalPool
    from cuda_agent.sandbox.service import create_app

    tmp_path.chmod(0o755)
    with LocalPool(build_workers=1) as pool, TestClient(create_app(pool, workspace_root=tmp_path)) as http:
        running = pool.submit(CommandJob(id="twice", argv=["sleep", "30"], cwd=str(tmp_path)))
        response = http.post("/workspace/command", json={"id": "twice", "argv": ["true"], "cwd": str(tmp_path)})
        pool.cancel("twice")
        assert running.result(timeout=30).status == "cancelled"
    assert response.status_code == 422 and "Retry-After" not in response.headers
    assert response.json() == {
        "error": "job twice is already in flight: give each job a new id",
        "error_type": "ConfigError",
    }


def test_cli_judge_hands_the_candidate_to_a_named_service(service, tmp_path: Path) -> None:
    url, client = service
    solution = tmp_path / "relu.py"
    solution.write_text(RELU)
    before = client.metrics().completed
    cmd = [sys.executable, "-m", "cuda_agent", "judge", "examples/relu", str(solution), "--no-time", "--trials", "2"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_AGENT_SANDBOX")}
    run = subprocess.run(
        cmd + ["--json", "--sandbox", url, "--token", TOKEN], env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr
    verdict = Verdict.model_validate_json(run.stdout)
    assert (verdict.verdict, verdict.task) == ("pass", "examples/relu")
    assert client.metrics().completed == before + 1  # judged by the service, not in the CLI's process
    # The service named by the environment, as the workspace tools take it; a wrong token is the user's mistake.
    env.update(CUDA_AGENT_SANDBOX_URL=url, CUDA_AGENT_SANDBOX_TOKEN="wrong")
    refused = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "401" in refused.stderr and "Traceback" not in refused.stderr, refused.stderr
    assert client.metrics().completed == before + 1


def test_the_local_service_answers_on_its_socket_to_its_token_alone(tmp_path: Path) -> None:
    """What `solve` and `demo` give the workspace's tools: the episode's pool on a Unix socket, with a fresh token
    (the full path, verification judged there, runs in tests/agent/test_loop.py's demo)."""
    from cuda_agent.sandbox.local import LocalPool
    from cuda_agent.sandbox.service import local_service

    with LocalPool(build_workers=1) as pool, local_service(pool, tmp_path) as env:
        url, token = env["CUDA_AGENT_SANDBOX_URL"], env["CUDA_AGENT_SANDBOX_TOKEN"]
        socket_path = Path(url.removeprefix("unix:"))
        assert url.startswith("unix:") and socket_path.is_socket()
        with SandboxClient(url, token) as client:
            assert client.health()["status"] == "ok" and client.metrics().completed == 0
        with SandboxClient(url) as anonymous, pytest.raises(ConfigError, match="Bearer"):
            anonymous.metrics()
    assert not socket_path.exists()  # gone with the episode
