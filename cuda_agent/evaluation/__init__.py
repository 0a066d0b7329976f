"""KernelBench evaluation (`cuda-agent bench`): the paper's metrics, speed-of-light bounds, reports.

- `suites.py`: which tasks a suite names and which solution file belongs to each task;
- `runner.py`: judge a solutions folder through the sandbox pool, or run the agent per task; JSONL as it goes;
- `episodes.py`: one scored agent episode (best-in-trajectory and final verdicts);
- `metrics.py`: pass rate, faster-than-eager/compile shares, geometric-mean speedups, fast_p, counts;
- `speed_of_light.py`: minimum bytes and FLOPs per task, device ceilings, the lower bound on time;
- `report_md.py`, `report_html.py`: report.md (the paper's table) and report.html (inline SVG plots);
- `bench.py`: `run_bench`, `build_report`, `write_reports`;
- `baselines.py`: eager/compile baselines of a suite as a data file, and seeding the judge's cache from it.

Names resolve lazily, so importing the package imports neither torch nor matplotlib.
"""

from typing import Any

_EXPORTS = {
    "BenchConfig": "cuda_agent.evaluation.records",
    "BenchReport": "cuda_agent.evaluation.records",
    "TaskResult": "cuda_agent.evaluation.records",
    "compute_metrics": "cuda_agent.evaluation.metrics",
    "run_bench": "cuda_agent.evaluation.bench",
    "write_reports": "cuda_agent.evaluation.bench",
    "load_report": "cuda_agent.evaluation.bench",
    "select_tasks": "cuda_agent.evaluation.suites",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(name)
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name]), name)
