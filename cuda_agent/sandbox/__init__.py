"""The sandbox: isolation and scheduling of candidate code, locally, on Ray, or behind HTTP.

Jobs (`JudgeJob`, `CommandJob`) go to a pool (`LocalPool`, `RayPool`) whose `submit` returns a
concurrent.futures Future of exactly one `JobResult`. `cuda-agent serve` puts a pool behind HTTP
(`service.py`) and `SandboxClient` talks to it. Names resolve lazily, so `import cuda_agent`
never imports Ray, FastAPI or httpx.
"""

from typing import Any

_EXPORTS = {
    "JudgeJob": "cuda_agent.sandbox.jobs",
    "CommandJob": "cuda_agent.sandbox.jobs",
    "SourceSolution": "cuda_agent.sandbox.jobs",
    "PathSolution": "cuda_agent.sandbox.jobs",
    "make_judge_job": "cuda_agent.sandbox.jobs",
    "JobResult": "cuda_agent.sandbox.jobs",
    "CommandResult": "cuda_agent.sandbox.jobs",
    "PoolMetrics": "cuda_agent.sandbox.jobs",
    "SandboxLimits": "cuda_agent.sandbox.limits",
    "LocalPool": "cuda_agent.sandbox.local",
    "PoolFullError": "cuda_agent.errors",
    "RayPool": "cuda_agent.sandbox.ray_pool",
    "SandboxClient": "cuda_agent.sandbox.client",
    "create_app": "cuda_agent.sandbox.service",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(name)
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name]), name)
