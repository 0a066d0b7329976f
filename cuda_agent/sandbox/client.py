"""A client of the reward service (`cuda-agent serve`), for trainers and scripts on other machines.

Back-pressure, not loss: a full queue (503 PoolFullError, or 429 from a proxy in front) and a service that
restarts (the connection refused or cut after it had answered this client) are waited out with exponential
backoff and jitter, up to `retry_s`; the same job id is sent again. A URL that never answered fails at once
(a typo should not hang a user for minutes), and so does a failure of the judge itself (503 JudgeInfraError:
the trainer drops that sample).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from cuda_agent.errors import ConfigError, Error, PoolFullError, SandboxError, ServiceUnreachableError
from cuda_agent.judge import JudgeConfig
from cuda_agent.sandbox.jobs import CommandResult, PoolMetrics, error_class, judge_config, new_job_id, portable_config
from cuda_agent.types import Task, Verdict

log = logging.getLogger(__name__)


def _error(status: int, detail: Any) -> type[Error]:
    """The class to raise for a refused or failed request: the one the service named (it names one in every
    answer but 200); for an answer that is not the service's (a proxy, a wrong URL or port), by status: a 4xx is
    the request's fault, anything else means no service answers there."""
    if isinstance(detail, dict) and detail.get("error_type"):
        return error_class(detail["error_type"])
    return ConfigError if 400 <= status < 500 else ServiceUnreachableError


class ConnectionLost(ServiceUnreachableError):
    """No connection to the service, or one it cut: a restart when the service answered this client before."""


class SandboxClient:
    """Talks to one service. Thread-safe (httpx.Client is); close it, or use it as a context manager."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        token: str | None = None,
        timeout_s: float = 3600,
        retry_s: float = 900.0,
        backoff_s: float = 0.25,
        max_backoff_s: float = 30.0,
    ):
        """
        Args:
            base_url: http(s)://HOST:PORT, or unix:PATH for a service on a Unix socket (`service.local_service`).
            timeout_s: longest wait for one answer.
            retry_s: longest time to keep retrying a full queue or a restarting service (0: never retry).
            backoff_s: the first wait between tries; each later one doubles, up to `max_backoff_s`, with jitter.
        """
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        transport = None
        if base_url.startswith("unix:"):
            transport, base_url = httpx.HTTPTransport(uds=base_url.removeprefix("unix:")), "http://local-sandbox"
        self._http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout_s, transport=transport)
        self.retry_s, self.backoff_s, self.max_backoff_s = retry_s, backoff_s, max_backoff_s
        self.retries = 0  # tries waited out so far (a full queue or a restart), for the caller's metrics
        self._answered = False  # the service answered once: a refused connection after that is a restart

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/health")[0]

    def judge(
        self,
        task: Task | str,
        solution: str,
        config: JudgeConfig | Mapping[str, Any] | None = None,
        job_id: str | None = None,
    ) -> Verdict:
        """The verdict for `solution` (source text, sent as is) on `task` (a Task, sent as its source and
        reference, or a reference the service resolves).

        Raises:
            InfraError: ours (JudgeInfraError, SandboxError, PoolFullError, ...), as the same class the service's
                pool reported (or SandboxError when the service cannot be reached): retry or drop, never score.
            Error: the request or its input is wrong (ConfigError for a refused request; TaskError, ...).
        """
        return self._judge(task, {"solution": solution}, config, job_id)

    def judge_workspace(
        self,
        task: Task | str,
        workspace: Path,
        config: JudgeConfig | Mapping[str, Any] | None = None,
        job_id: str | None = None,
    ) -> Verdict:
        """The verdict for a workspace folder (or solution file) that the service reads by path: it must be
        below the service's `--workspace-root`, at the same path on both machines.

        Raises:
            InfraError, Error: as `judge` (ConfigError for a path outside the service's root).
        """
        return self._judge(task, {"workspace": str(workspace)}, config, job_id)

    def _judge(
        self, task: Task | str, body: dict[str, str], config: JudgeConfig | Mapping[str, Any] | None, job_id: str | None
    ) -> Verdict:
        # A Task travels as its source (what the service judges) and its reference (what the verdict is called).
        named = {"task": task} if isinstance(task, str) else {"task": task.code, "task_ref": task.ref}
        settings = portable_config(judge_config(config))
        payload, _ = self._call(
            "POST", "/judge", json={**named, **body, "config": settings, "id": job_id or new_job_id()}
        )
        return Verdict.model_validate(payload)

    def run_command(self, argv: list[str], cwd: str, timeout_s: float = 600.0, **fields: Any) -> CommandResult:
        """Run a command in a workspace folder on the service's machine."""
        body = {"argv": argv, "cwd": cwd, "timeout_s": timeout_s, **fields}
        return CommandResult.model_validate(self._call("POST", "/workspace/command", json=body)[0])

    def metrics(self) -> PoolMetrics:
        return PoolMetrics.model_validate(self._call("GET", "/metrics")[0])

    def _call(self, method: str, path: str, **kwargs: Any) -> tuple[Any, httpx.Headers]:
        deadline, wait = time.monotonic() + self.retry_s, self.backoff_s
        while True:
            try:
                return self._call_once(method, path, **kwargs)
            except (PoolFullError, ConnectionLost) as exc:
                pause = min(wait, self.max_backoff_s) * random.uniform(0.5, 1.0)  # jitter: no synchronised waves
                if not self._retryable(exc) or time.monotonic() + pause > deadline:
                    raise
                log.info("sandbox service busy or restarting (%s); retrying in %.1f s", exc, pause)
                self.retries += 1
                time.sleep(pause)
                wait *= 2

    def _retryable(self, exc: Exception) -> bool:
        return isinstance(exc, PoolFullError) or self._answered

    def _call_once(self, method: str, path: str, **kwargs: Any) -> tuple[Any, httpx.Headers]:
        url = self._http.base_url
        try:
            response = self._http.request(method, path, **kwargs)
        except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise self._unreachable(exc, url) from exc
        except httpx.HTTPError as exc:
            raise SandboxError(f"cannot reach the sandbox service at {url}: {exc}") from exc
        if response.status_code == 429:  # a proxy's rate limit in front of the service: a full queue by another name
            raise PoolFullError(f"{method} {path} answered 429 (too many requests)")
        if response.status_code != 200:
            detail = response.json() if "json" in response.headers.get("content-type", "") else response.text
            if isinstance(detail, dict) and isinstance(detail.get("error_type"), str):
                self._answered = True
            # The service says what is wrong in one line; anything else is not the service's answer (a wrong URL).
            if isinstance(detail, dict) and isinstance(detail.get("error"), str):
                said = detail["error"]
            else:
                said = f"{' '.join(str(detail).split())[:200]} (is {url} a cuda-agent service?)"
            raise _error(response.status_code, detail)(f"{method} {path} answered {response.status_code}: {said}")
        self._answered = True
        return response.json(), response.headers

    @staticmethod
    def _unreachable(exc: httpx.HTTPError, url: Any) -> ConnectionLost:
        if isinstance(exc, httpx.ConnectError):  # nothing listens there, or no such host: what the caller named
            return ConnectionLost(
                f"cannot reach the sandbox service at {url} ({exc}): check the URL and port, and that "
                "`cuda-agent serve` runs there (GET /health answers)"
            )
        return ConnectionLost(f"the sandbox service at {url} closed the connection: {exc!r}")

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SandboxClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
