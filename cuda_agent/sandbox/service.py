"""The reward service: a pool behind HTTP (FastAPI), started by `cuda-agent serve`.

Endpoints:
- `GET /health`: 200 and {"status": "ok", ...}.
- `POST /judge` {"task", "solution" | "workspace", "config"?, "id"?}: the judge's verdict JSON; the job id
  in the `X-Job-Id` header. `solution` is the solution's source text (any length, one line too);
  `workspace` names a workspace folder or solution file on this machine, below the folder the operator
  named with `--workspace-root` (a relative path is taken from there). No verdict: {"error", "error_type"}
  with 503 for a failure of ours (the judge's, the sandbox's, a full queue: retry, never score it), 422
  for a bad task, solution or config found while judging or a job the pool refuses as the caller's mistake
  (an id still in flight), 409 for a cancelled job; `SandboxClient` raises
  `error_type` as that same exception class (cuda_agent.errors).
- `POST /workspace/command` {"argv", "cwd", "timeout_s"?, ...}: a CommandResult as JSON; `cwd` below the
  workspace root as well.
- `GET /metrics`: the pool's PoolMetrics.
- `GET /stats`: the pool's measured Capacity: judgements per hour (per GPU too) and the queue's size, which
  `cuda-agent plan` and the training dry run read.
A client's mistake (no JSON, a missing or unknown field, both or neither of solution and workspace, an
unknown task, a bad config field, a path outside the root, a missing token) gets a 4xx answer whose body is
{"error": "<one line>", "error_type": "ConfigError"}; the body is read as JSON whatever its Content-Type says
(`curl -d` sends a form type).
With a token, every endpoint but /health needs `Authorization: Bearer TOKEN`.

What this does not protect against: a workspace below the root is read by path, so anyone who can
write there decides what the judge reads there; the root only keeps requests from naming other folders of the
machine, and the solution's files are never read through a symbolic link (judge/solution.py refuses one).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import secrets
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from fastapi import Depends, FastAPI, Header, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cuda_agent.errors import ConfigError, Error, InfraError, PoolFullError, SandboxError
from cuda_agent.judge import JudgeConfig
from cuda_agent.sandbox.jobs import (
    CommandJob,
    JobResult,
    JudgeJob,
    PathSolution,
    SourceSolution,
    error_class,
    new_job_id,
    task_of,
)
from cuda_agent.sandbox.stats import capacity
from cuda_agent.tasks import Catalog
from cuda_agent.tasks.catalog import SOURCES

LOOPBACK = ("127.0.0.1", "localhost", "::1")
ModelT = TypeVar("ModelT", bound=BaseModel)


class JudgeRequest(BaseModel):
    """Body of POST /judge: the task and exactly one of the solution's source text or a workspace path."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(
        min_length=1,
        description="A bundled task (examples/relu, kernelbench/L1/19, ops6k/12), the task's source, or a "
        "problem file below the workspace root.",
    )
    solution: str | None = Field(
        default=None, min_length=1, description="The solution's source text (a file defining ModelNew)."
    )
    workspace: str | None = Field(
        default=None,
        min_length=1,
        description="A workspace folder or solution file on the service's machine, below --workspace-root "
        "(a relative path is taken from the root).",
    )
    task_ref: str | None = Field(
        default=None,
        min_length=1,
        description="With task source: the reference the verdict names (e.g. 'examples/linear_gelu'); "
        "default 'inline/<digest>'. The source is what is judged; this is only its name.",
    )
    config: dict[str, Any] = Field(default_factory=dict, description="JudgeConfig fields.")
    id: str = Field(default_factory=new_job_id, description="Job id, echoed in X-Job-Id.")

    @model_validator(mode="after")
    def _one_solution(self) -> JudgeRequest:
        if (self.solution is None) == (self.workspace is None):
            raise ValueError("give exactly one of 'solution' (source text) and 'workspace' (a path below the root)")
        return self


def parse_body(model: type[ModelT], body: bytes) -> ModelT:
    """The request body as `model`, read as JSON whatever the Content-Type; ClientError (422) otherwise."""
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise ClientError(422, one_line(exc)) from None


def one_line(exc: ValidationError) -> str:
    """pydantic's errors as one line: `field: message; ...` (or the message alone for the whole body)."""
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    if any(e["type"] == "json_invalid" for e in exc.errors()):
        return 'the body is not JSON: send a JSON object, e.g. -d \'{"task": ..., "solution": ...}\''
    return "; ".join(parts)


class Paths:
    """Which paths requests may name: those below the operator's workspace root, or none without one."""

    def __init__(self, root: Path | None) -> None:
        self.root = root.resolve() if root is not None else None

    def below_root(self, value: str, what: str) -> Path:
        """`value` (absolute, or relative to the root) as an existing path below the root.

        Raises:
            ClientError: no root was named (403), the path leaves it (403) or does not exist (404).
        """
        if self.root is None:
            raise ClientError(403, f"{what}: this service reads no paths; its operator can allow a folder with "
                                   "`cuda-agent serve --workspace-root DIR`, or send the source text")  # fmt: skip
        path = (self.root / Path(value).expanduser()).resolve()  # an absolute value replaces the root
        if not path.is_relative_to(self.root):
            raise ClientError(403, f"{what} {value!r} is outside the workspace root {self.root}")
        if not path.exists():
            raise ClientError(404, f"{what} {value!r}: no such file or folder below {self.root}")
        return path

    def task(self, value: str) -> str:
        """A bundled reference or task source as given; anything else is a problem file below the root."""
        parts = value.split("/")
        # A bundled reference never climbs (`examples/../x.py` would name a file beside the service's folder).
        if "\n" in value or (parts[0] in SOURCES and "::" not in value and ".." not in parts):
            return value
        head, sep, key = value.partition("::")
        return str(self.below_root(head, "task")) + sep + key


class Unanswered(Exception):
    """A job that got no verdict or command result: its status, message and our error class for the client."""

    def __init__(self, status: int, message: str, error_type: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.error_type, self.headers = status, error_type, headers or {}

    def response(self) -> JSONResponse:
        body = {"error": str(self), "error_type": self.error_type}
        return JSONResponse(body, status_code=self.status, headers=self.headers)


class ClientError(Unanswered):
    """A request the service refuses: its HTTP status and one line saying what to send instead (a ConfigError
    for the client: retrying the same request cannot help)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(status, message, "ConfigError")


def unanswered(result: JobResult, headers: dict[str, str]) -> JSONResponse:
    """The answer to a job without a result: 503 when the failure was ours (retry; never score it), 422 for
    input found bad while judging (a task that does not run), 409 when it was cancelled (or the pool closed)."""
    if result.status == "cancelled":
        return Unanswered(409, result.error or "the job was cancelled", "SandboxError", headers).response()
    error_type = error_class(result.error_type)
    status = 503 if issubclass(error_type, InfraError) else 422
    return Unanswered(status, result.error or result.status, error_type.__name__, headers).response()


def check_bind(host: str, token: str | None) -> None:
    """Refuse to listen beyond this machine without a token."""
    if host not in LOOPBACK and not token:
        raise ConfigError(
            f"refusing to serve on {host} without a token: anyone who can reach it could run code here. "
            "Pass --token T (clients send 'Authorization: Bearer T') or bind to 127.0.0.1"
        )


OPERATORS_FIELDS = frozenset({"candidate_user"})
"""JudgeConfig fields no request may set: who the candidate runs as is the pool's (`SandboxLimits.user`). Any local
process may reach a service on loopback, the candidates of `cuda-agent judge` among them; with `candidate_user: null`
one had its own code run as the service's user (root), which rewrote that judgement's result (round 16's r2)."""


def judge_job(request: JudgeRequest, defaults: dict[str, Any], paths: Paths, catalog: Catalog) -> JudgeJob:
    """The job a valid request asks for (`defaults` under its config); ClientError naming the first thing wrong."""
    if OPERATORS_FIELDS & request.config.keys():
        raise ClientError(
            403,
            f"config: {', '.join(sorted(OPERATORS_FIELDS & request.config.keys()))} is the service's, not a request's",
        )
    try:
        config = JudgeConfig(**{**defaults, **request.config})
    except ValidationError as exc:
        raise ClientError(422, f"config: {one_line(exc)}") from None
    task = paths.task(request.task)
    try:
        resolved = task_of(task, request.task_ref, catalog)
    except Error as exc:
        raise ClientError(422, f"task: {exc}".replace("\n", " ")) from None
    if request.workspace is not None:
        solution: SourceSolution | PathSolution = PathSolution(
            path=str(paths.below_root(request.workspace, "workspace"))
        )
    else:
        solution = SourceSolution(code=request.solution or "")
    return JudgeJob(id=request.id, task=resolved, solution=solution, config=config)


def make_workspace_root(root: Path | None) -> None:
    """Create the operator's workspace root if it is missing (episodes write their workspaces there later).

    Raises:
        ConfigError: `root` exists and is not a folder.
    """
    if root is None:
        return
    try:
        root.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise ConfigError(f"--workspace-root {root}: not a folder ({exc.strerror}); name a folder") from exc


def create_app(
    pool: Any, token: str | None = None, defaults: dict[str, Any] | None = None, workspace_root: Path | None = None
) -> FastAPI:
    """The HTTP app in front of `pool` (a LocalPool or RayPool; the caller owns and closes it).

    `defaults` are JudgeConfig fields for every /judge request (e.g. the policy); a request's config wins.
    `workspace_root`: the folder below which requests may name workspaces, problem files and command
    folders; None: requests carry source text only.
    """
    defaults = dict(defaults or {})
    paths, catalog = Paths(workspace_root), Catalog()
    app = FastAPI(title="cuda-agent sandbox", version="1")

    @app.exception_handler(Unanswered)  # ClientError too
    async def not_judged(_request: Request, exc: Unanswered) -> JSONResponse:
        return exc.response()

    def authorize(authorization: str | None = Header(default=None)) -> None:
        if token is None:
            return
        expected = f"Bearer {token}"
        if authorization is None or not hmac.compare_digest(authorization, expected):
            raise ClientError(401, "send 'Authorization: Bearer <token>'")

    async def run(job: JudgeJob | CommandJob) -> JobResult:
        try:
            future = pool.submit(job)
        except Error as exc:  # refused at submit: ours (a full or closed pool: 503) or the request's (422)
            retry = {"Retry-After": "5"} if isinstance(exc, PoolFullError) else {}
            status = 503 if isinstance(exc, InfraError) else 422
            raise Unanswered(status, str(exc), type(exc).__name__, retry) from exc
        return await asyncio.wrap_future(future)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "workers": pool.metrics().workers}

    @app.post("/judge", dependencies=[Depends(authorize)])
    async def judge(request: Request) -> JSONResponse:
        # Resolving a task may load a data set from disk: off the event loop.
        job = await asyncio.to_thread(
            judge_job, parse_body(JudgeRequest, await request.body()), defaults, paths, catalog
        )
        result = await run(job)
        headers = {"X-Job-Id": result.job_id}
        if result.status == "done":
            return JSONResponse(result.verdict.model_dump(mode="json"), headers=headers)
        return unanswered(result, headers)

    @app.post("/workspace/command", dependencies=[Depends(authorize)])
    async def command(request: Request) -> JSONResponse:
        job = parse_body(CommandJob, await request.body())
        job = job.model_copy(update={"cwd": str(paths.below_root(job.cwd, "cwd"))})
        result = await run(job)
        headers = {"X-Job-Id": result.job_id}
        if result.status == "done":
            return JSONResponse(result.command.model_dump(mode="json"), headers=headers)
        return unanswered(result, headers)

    @app.get("/metrics", dependencies=[Depends(authorize)])
    async def metrics() -> dict[str, Any]:
        return pool.metrics().model_dump()

    @app.get("/stats", dependencies=[Depends(authorize)])
    async def stats() -> dict[str, Any]:
        return capacity(pool.metrics(), len(pool.slots), pool.max_pending).model_dump()

    return app


def serve(
    pool: Any,
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    defaults: dict[str, Any] | None = None,
    workspace_root: Path | None = None,
) -> None:
    """Serve until interrupted (blocking); `defaults` and `workspace_root` as in create_app."""
    import uvicorn

    check_bind(host, token)
    make_workspace_root(workspace_root)
    app = create_app(pool, token, defaults, workspace_root)
    uvicorn.run(app, host=host, port=port, log_level="warning")


@contextlib.contextmanager
def local_service(pool: Any, workspace_root: Path) -> Iterator[dict[str, str]]:
    """`pool` served on a Unix socket of this machine, from a thread of ours, while the block runs: the environment
    it yields points the workspace's tools (`python -m utils.verification`, `utils.profiling`) at it, so that they
    reach the pool's processes started ahead instead of starting the judge cold in the tool's own process (what
    `cuda-agent serve` gives a trainer, without one). A fresh token guards it; the socket's folder is ours.

    Raises:
        SandboxError: the server did not start within 30 s.
    """
    import uvicorn

    from cuda_agent.sandbox.workspace_commands import SANDBOX_TOKEN_ENV, SANDBOX_URL_ENV

    token = secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory(prefix="cuda-agent-sock-") as folder:
        socket_path = Path(folder) / "sandbox.sock"
        config = uvicorn.Config(
            create_app(pool, token, None, workspace_root), uds=str(socket_path), log_level="warning", lifespan="off"
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, name="cuda-agent-local-service", daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                server.should_exit = True
                raise SandboxError("the local sandbox service did not start on its socket within 30 s")
            time.sleep(0.01)
        # The agent's commands may run as the sandbox's unprivileged user: the way to the socket is open, the
        # token is what admits a request.
        Path(folder).chmod(0o711)
        socket_path.chmod(0o666)
        try:
            yield {SANDBOX_URL_ENV: f"unix:{socket_path}", SANDBOX_TOKEN_ENV: token}
        finally:
            server.should_exit = True
            thread.join(timeout=10)
