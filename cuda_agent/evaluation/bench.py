"""`cuda-agent bench`: run a suite, then write results.json, report.md and report.html from one run.

`run_bench` is the library call behind the command: it chooses the tasks, judges (or solves) the
ones not yet in the run's results.jsonl, estimates each task's speed of light, computes the
paper's metrics and returns the report; `write_reports` writes the three files.
"""

from __future__ import annotations

import logging
import os
import platform
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from cuda_agent.agent.models import Model
from cuda_agent.errors import ConfigError
from cuda_agent.evaluation import speed_of_light as sol
from cuda_agent.evaluation.episodes import solve_task
from cuda_agent.evaluation.metrics import compute_metrics
from cuda_agent.evaluation.records import BenchConfig, BenchReport, TaskResult
from cuda_agent.evaluation.refusals import refusals
from cuda_agent.evaluation.report_md import render_markdown
from cuda_agent.evaluation.runner import Pool, ResultStore, finished, judge_solutions, progress_bar, run_episodes
from cuda_agent.evaluation.suites import select_tasks, solutions_dir
from cuda_agent.judge import PROTOCOL_VERSION
from cuda_agent.machine import cache_root, detect_device, gpu_name
from cuda_agent.tasks import Catalog
from cuda_agent.types import Task

log = logging.getLogger(__name__)
RESULTS, CONFIG = "results.jsonl", "config.json"
_RESUMABLE = {"workers", "speed_of_light"}
"""Settings a resumed run may change: they change neither a verdict nor a timing."""


def _check_resume(config: BenchConfig, out_dir: Path, resume: bool) -> None:
    """A run folder holds one configuration: resuming under another would mix two experiments."""
    path = out_dir / CONFIG
    if not path.exists():
        path.write_text(config.model_dump_json(indent=2))
        return
    if not resume:
        raise ConfigError(f"{out_dir} already holds a run: pass --resume to carry it on, or choose a new --out")
    before = BenchConfig.model_validate_json(path.read_text())
    differs = [k for k in BenchConfig.model_fields if k not in _RESUMABLE and getattr(before, k) != getattr(config, k)]
    if differs:
        raise ConfigError(
            f"--resume: {out_dir} was started with other settings ({', '.join(differs)}): "
            "use the same ones, or choose a new --out"
        )


def run_bench(
    config: BenchConfig,
    out_dir: Path,
    pool: Pool,
    model_factory: Callable[[], Model] | None = None,
    resume: bool = False,
    catalog: Catalog | None = None,
    show_progress: bool = True,
) -> BenchReport:
    """Run (or carry on) a benchmark in `out_dir` and return its report (not yet written).

    Raises:
        ConfigError: bad suite, solutions folder, or an `out_dir` that holds another run.
    """
    if (config.model is None) == (config.solutions is None):
        raise ConfigError("give exactly one of --model (run the agent) and --solutions (judge a folder)")
    device = detect_device(config.device)
    tasks = select_tasks(config.suite, config.levels, catalog)
    # Bad input is refused before the run folder, its config.json or a progress bar exist.
    folder = solutions_dir(config.solutions, device, config.language) if config.solutions is not None else None
    out_dir.mkdir(parents=True, exist_ok=True)
    _check_resume(config, out_dir, resume)
    store = ResultStore(out_dir / RESULTS)
    keep = finished(store.load())
    todo = [t for t in tasks if t.ref not in keep]
    judge_config = {"device": device, **config.judge}
    with progress_bar(len(todo), f"bench {config.suite}", enabled=show_progress) as advance:
        if config.model is not None:
            assert model_factory is not None, "run_bench with a model needs a model_factory"

            def solve(task: Task) -> TaskResult:
                model = model_factory()
                return solve_task(task, model, pool, device, out_dir, config.max_turns, config.judge, config.language)

            run_episodes(todo, solve, config.workers, store, advance)
        else:
            assert folder is not None
            judge_solutions(todo, folder, pool, judge_config, store, advance, window=config.workers + 2)
    results = store.load()
    return build_report(config, [results[t.ref] for t in tasks if t.ref in results], tasks, device)


def _device_name(results: list[TaskResult], device: str) -> str:
    for r in results:
        if r.verdict is not None and r.verdict.env.get("device_name"):
            return str(r.verdict.env["device_name"])
    return gpu_name() if device == "cuda" else "cpu"


def _environment(results: list[TaskResult], device: str) -> dict:
    import torch

    judge_env = next((r.verdict.env for r in results if r.verdict is not None and "flags" in r.verdict.env), {})
    # The judged verdicts carry the versions of the machine that judged them; a report rendered again
    # elsewhere (`cuda-agent bench report`, or --resume with nothing left) must not claim this host's.
    return {
        "python": judge_env.get("python", platform.python_version()),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "torch": judge_env.get("torch", torch.__version__),
        "cuda": judge_env.get("cuda", torch.version.cuda),
        "device": device,
        "device_name": _device_name(results, device),
        "judge_env": judge_env,
    }


def build_report(config: BenchConfig, results: list[TaskResult], tasks: list[Task], device: str) -> BenchReport:
    """Speed-of-light bounds, metrics (best and, with a model, final) and the environment, as one report."""
    ceilings = None
    if config.speed_of_light and results:
        ceilings = sol.device_ceilings(device, _device_name(results, device))
        by_ref = {t.ref: t for t in tasks}
        estimates = sol.estimate([by_ref[r.ref] for r in results], cache_root())
        results = [r.model_copy(update={"speed_of_light": sol.with_bound(estimates[r.ref], ceilings)}) for r in results]
    return BenchReport(
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        protocol_version=PROTOCOL_VERSION,
        config=config,
        environment=_environment(results, device),
        ceilings=ceilings,
        metrics=compute_metrics(results),
        final_metrics=compute_metrics(results, pick=lambda r: r.final) if config.model else None,
        tasks=results,
        refusals=refusals(results, kernelbench=config.judge.get("policy") == "kernelbench"),
    )


def write_reports(report: BenchReport, out_dir: Path) -> list[Path]:
    """results.json, report.md and report.html (the page needs matplotlib; without it, a warning)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    markdown = render_markdown(report)
    written = [out_dir / "results.json", out_dir / "report.md"]
    written[0].write_text(report.model_dump_json(indent=1))
    written[1].write_text(markdown)
    try:
        from cuda_agent.evaluation.report_html import render_html

        page = render_html(report, markdown)
    except ImportError as exc:
        log.warning("report.html skipped (%s): install matplotlib and run `cuda-agent bench report %s`", exc, out_dir)
        return written
    (out_dir / "report.html").write_text(page)
    return [*written, out_dir / "report.html"]


def load_report(out_dir: Path) -> BenchReport:
    """The results.json of a finished run, its metrics computed again from its tasks (to render it again); for a run
    that stopped before its end (killed, or cut by a time limit), a report of the tasks its results.jsonl holds now
    (an unfinished report written before may be older than a resumed run's later results)."""
    path = out_dir / "results.json"
    partial = (out_dir / RESULTS).exists() and (out_dir / CONFIG).exists()
    if not path.exists():
        if partial:
            return _unfinished_report(out_dir)
        raise ConfigError(f"{path} does not exist: run `cuda-agent bench --out {out_dir} ...` first")
    report = BenchReport.model_validate_json(path.read_text())
    if not report.finished and partial:
        return _unfinished_report(out_dir)
    final = compute_metrics(report.tasks, pick=lambda r: r.final) if report.config.model else None
    kernelbench = report.config.judge.get("policy") == "kernelbench"
    update = {"metrics": compute_metrics(report.tasks), "final_metrics": final}
    return report.model_copy(update=update | {"refusals": refusals(report.tasks, kernelbench)})


def _unfinished_report(out_dir: Path) -> BenchReport:
    """The report of the tasks a stopped run finished, marked unfinished; no speed-of-light bounds (they need the
    task data and the GPU's ceilings, which rendering elsewhere may not have)."""
    config = BenchConfig.model_validate_json((out_dir / CONFIG).read_text())
    results = list(ResultStore(out_dir / RESULTS).load().values())
    if not results:
        raise ConfigError(f"{out_dir / RESULTS} holds no finished task yet: nothing to report")
    devices = {str(r.verdict.env["device"]) for r in results if r.verdict is not None and r.verdict.env.get("device")}
    device = config.device if config.device != "auto" else (devices.pop() if len(devices) == 1 else "cpu")
    report = build_report(config.model_copy(update={"speed_of_light": False}), results, [], device)
    return report.model_copy(update={"finished": False})
