"""The reward service: a pool behind HTTP (FastAPI), started by `cuda-agent serve`.

Endpoints:
- `GET /health`: 200 and {"status": "ok", ...}.
- `POST /judge` {"task", "solution", "config"?, "id"?}: the judge's verdict JSON; the job id in
  the `X-Job-Id` header. 503 when the queue is full (retry), 422 for a bad task or solution.
- `POST /workspace/command` {"argv", "cwd", "timeout_s"?, ...}: a CommandResult as JSON.
- `GET /metrics`: the pool's PoolMetrics.
With a token, every endpoint but /health needs `Authorization: Bearer TOKEN`.
"""

from __future__ import annotations

import asyncio
import hmac
from typing import Any

from fastapi import Depends, FastAPI, Header, HTTPException
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.errors import ConfigError
from cuda_agent.sandbox.jobs import CommandJob, JobResult, JudgeJob, new_job_id
from cuda_agent.sandbox.local import PoolFullError

LOOPBACK = ("127.0.0.1", "localhost", "::1")


class JudgeRequest(BaseModel):
    """Body of POST /judge."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(description="Task reference or task source.")
    solution: str = Field(description="Single-file solution source.")
    config: dict[str, Any] = Field(default_factory=dict, description="JudgeConfig fields.")
    id: str = Field(default_factory=new_job_id, description="Job id, echoed in X-Job-Id.")


def check_bind(host: str, token: str | None) -> None:
    """Refuse to listen beyond this machine without a token."""
    if host not in LOOPBACK and not token:
        raise ConfigError(
            f"refusing to serve on {host} without a token: anyone who can reach it could run code here. "
            "Pass --token T (clients send 'Authorization: Bearer T') or bind to 127.0.0.1"
        )


def create_app(pool: Any, token: str | None = None, defaults: dict[str, Any] | None = None) -> FastAPI:
    """The HTTP app in front of `pool` (a LocalPool or RayPool; the caller owns and closes it).

    `defaults` are JudgeConfig fields for every /judge request (e.g. the policy); a request's config wins.
    """
    defaults = dict(defaults or {})
    app = FastAPI(title="cuda-agent sandbox", version="1")

    def authorize(authorization: str | None = Header(default=None)) -> None:
        if token is None:
            return
        expected = f"Bearer {token}"
        if authorization is None or not hmac.compare_digest(authorization, expected):
            raise HTTPException(status_code=401, detail="send 'Authorization: Bearer <token>'")

    async def run(job: JudgeJob | CommandJob) -> JobResult:
        try:
            future = pool.submit(job)
        except PoolFullError as exc:
            raise HTTPException(status_code=503, detail=str(exc), headers={"Retry-After": "5"}) from exc
        return await asyncio.wrap_future(future)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "workers": pool.metrics().workers}

    @app.post("/judge", dependencies=[Depends(authorize)])
    async def judge(request: JudgeRequest) -> JSONResponse:
        config = {**defaults, **request.config}
        job = JudgeJob(id=request.id, task=request.task, solution=request.solution, config=config)
        result = await run(job)
        headers = {"X-Job-Id": result.job_id}
        if result.status == "done":
            return JSONResponse(result.verdict.model_dump(mode="json"), headers=headers)
        code = 409 if result.status == "cancelled" else 422
        return JSONResponse({"error": result.error or result.status}, status_code=code, headers=headers)

    @app.post("/workspace/command", dependencies=[Depends(authorize)])
    async def command(job: CommandJob) -> JSONResponse:
        result = await run(job)
        headers = {"X-Job-Id": result.job_id}
        if result.status == "done":
            return JSONResponse(result.command.model_dump(mode="json"), headers=headers)
        return JSONResponse({"error": result.error or result.status}, status_code=409, headers=headers)

    @app.get("/metrics", dependencies=[Depends(authorize)])
    async def metrics() -> dict[str, Any]:
        return pool.metrics().model_dump()

    return app


def serve(
    pool: Any,
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    defaults: dict[str, Any] | None = None,
) -> None:
    """Serve until interrupted (blocking); `defaults` as in create_app."""
    import uvicorn

    check_bind(host, token)
    uvicorn.run(create_app(pool, token, defaults), host=host, port=port, log_level="warning")
