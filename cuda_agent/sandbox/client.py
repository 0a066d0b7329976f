"""A client of the reward service (`cuda-agent serve`), for trainers and scripts on other machines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from cuda_agent.errors import SandboxError
from cuda_agent.sandbox.jobs import CommandResult, PoolMetrics, new_job_id
from cuda_agent.types import Verdict


class SandboxClient:
    """Talks to one service. Thread-safe (httpx.Client is); close it, or use it as a context manager."""

    def __init__(self, base_url: str = "http://127.0.0.1:8000", token: str | None = None, timeout_s: float = 3600):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout_s)

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/health")[0]

    def judge(
        self, task: str, solution: str, config: dict[str, Any] | None = None, job_id: str | None = None
    ) -> Verdict:
        """The verdict for `solution` (source text, sent as is) on `task` (a reference or task source).

        Raises:
            SandboxError: the service refused or failed the job; the message says why.
        """
        return self._judge({"task": task, "solution": solution}, config, job_id)

    def judge_workspace(
        self, task: str, workspace: Path, config: dict[str, Any] | None = None, job_id: str | None = None
    ) -> Verdict:
        """The verdict for a workspace folder (or solution file) that the service reads by path: it must be
        below the service's `--workspace-root`, at the same path on both machines.

        Raises:
            SandboxError: the service refused (e.g. a path outside its root) or failed the job.
        """
        return self._judge({"task": task, "workspace": str(workspace)}, config, job_id)

    def _judge(self, body: dict[str, str], config: dict[str, Any] | None, job_id: str | None) -> Verdict:
        payload, _ = self._call("POST", "/judge", json={**body, "config": config or {}, "id": job_id or new_job_id()})
        return Verdict.model_validate(payload)

    def run_command(self, argv: list[str], cwd: str, timeout_s: float = 600.0, **fields: Any) -> CommandResult:
        """Run a command in a workspace folder on the service's machine."""
        body = {"argv": argv, "cwd": cwd, "timeout_s": timeout_s, **fields}
        return CommandResult.model_validate(self._call("POST", "/workspace/command", json=body)[0])

    def metrics(self) -> PoolMetrics:
        return PoolMetrics.model_validate(self._call("GET", "/metrics")[0])

    def _call(self, method: str, path: str, **kwargs: Any) -> tuple[Any, httpx.Headers]:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise SandboxError(f"cannot reach the sandbox service at {self._http.base_url}: {exc}") from exc
        if response.status_code != 200:
            detail = response.json() if "json" in response.headers.get("content-type", "") else response.text
            raise SandboxError(f"{method} {path} answered {response.status_code}: {detail}")
        return response.json(), response.headers

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SandboxClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
