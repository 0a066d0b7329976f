"""What a user reads when the sandbox service cannot be reached or refuses a request: one line each."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from cuda_agent.cli import main
from cuda_agent.errors import ConfigError, InfraError, ServiceUnreachableError, TaskError
from cuda_agent.sandbox.client import SandboxClient

RELU_CPU = Path(__file__).parents[2] / "cuda_agent" / "tasks" / "examples" / "solutions" / "cpu" / "relu.py"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens there once the socket closes


def test_a_url_nobody_answers_is_one_line_naming_it_and_what_to_check(capsys: pytest.CaptureFixture) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    assert main(["judge", "examples/relu", str(RELU_CPU), "--sandbox", url]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot reach the sandbox service at {url} (") and len(err.splitlines()) == 1
    assert "check the URL and port, and that `cuda-agent serve` runs there" in err and "ours" not in err
    assert issubclass(ServiceUnreachableError, InfraError)  # a trainer still drops the sample, never scores it


def _client(status: int, **answer) -> SandboxClient:
    client = SandboxClient("http://sandbox.test")
    transport = httpx.MockTransport(lambda _request: httpx.Response(status, **answer))
    client._http = httpx.Client(base_url="http://sandbox.test", transport=transport)
    return client


def test_a_refused_request_reads_as_the_services_one_line_not_a_dict() -> None:
    refused = {"error": "task: no task 'examples/nope' (3 tasks in that set)", "error_type": "TaskError"}
    with pytest.raises(TaskError) as raised, _client(422, json=refused) as client:
        client.judge("examples/nope", "x")
    assert str(raised.value) == "POST /judge answered 422: task: no task 'examples/nope' (3 tasks in that set)"
    with pytest.raises(ConfigError) as raised, _client(404, text="<html>\n<h1>Not Found</h1>\n</html>") as client:
        client.judge("examples/relu", "x")
    assert str(raised.value) == (
        "POST /judge answered 404: <html> <h1>Not Found</h1> </html> (is http://sandbox.test a cuda-agent service?)"
    )


def test_another_servers_error_page_is_no_service_not_our_failure() -> None:
    with pytest.raises(ServiceUnreachableError, match="501: .* \\(is http://sandbox.test a cuda-agent service\\?\\)"):
        with _client(501, text="<html>Unsupported method ('POST')</html>") as client:
            client.judge("examples/relu", "x")
