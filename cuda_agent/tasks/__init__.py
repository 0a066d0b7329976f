"""The task layer: KernelBench-format problems from bundled sets, user data and files."""

from cuda_agent.tasks.catalog import SOURCES, Catalog

__all__ = ["SOURCES", "Catalog"]
