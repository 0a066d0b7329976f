"""The `cuda-agent` command line: thin commands that wire the library's parts together.

Run `cuda-agent --help` for the list of commands. This module (with `recipes/`) is the only
place that picks concrete classes and configures logging.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from cuda_agent.cli_synth import add_synth_command, catalog_from_args, checked_device
from cuda_agent.cli_train import add_plan_command, add_train_command
from cuda_agent.errors import ConfigError, Error, InfraError, ServiceUnreachableError
from cuda_agent.types import LANGUAGES

if TYPE_CHECKING:
    from cuda_agent.judge import JudgeConfig
    from cuda_agent.types import Task, Verdict

EXIT_OURS = 3
"""Exit status when our own infrastructure failed (0: a verdict; 2: bad usage or input)."""


def cmd_tasks_list(args: argparse.Namespace) -> int:
    tasks = catalog_from_args(args).tasks(args.source)
    if args.level is not None:
        tasks = [t for t in tasks if t.level == args.level]
    if args.json:
        rows = [{"ref": t.ref, "name": t.name, "level": t.level, "source": t.source, **t.metadata} for t in tasks]
        print(json.dumps(rows))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{args.source}: {len(tasks)} tasks")
    # Only KernelBench-layout sets have levels and only Ops-6K-layout sets record their operators; an always-empty
    # column would read as missing data.
    with_level, with_ops = any(t.level is not None for t in tasks), any(t.metadata.get("ops") for t in tasks)
    for column in ("ref", "name", *(["level"] if with_level else []), *(["ops"] if with_ops else [])):
        table.add_column(column)
    for t in tasks:
        row = [t.ref, t.name, *(["" if t.level is None else str(t.level)] if with_level else [])]
        table.add_row(*row, *([", ".join(map(str, t.metadata.get("ops", [])))] if with_ops else []))
    Console().print(table)
    return 0


def _working(message: str, quiet: bool = False) -> AbstractContextManager:
    """A spinner and `message` on stderr while long work runs, on a terminal only: pipes and --json stay clean."""
    from rich.console import Console

    console = Console(stderr=True)
    return nullcontext() if quiet or not console.is_terminal else console.status(message)


def cmd_tasks_show(args: argparse.Namespace) -> int:
    from cuda_agent.tasks.inspection import inspect_task

    task = catalog_from_args(args).resolve(args.ref)
    inspection = None
    if args.inspect:
        checked_device(args.device)
        message = f"inspecting {task.ref}: running it once in a child process (large tasks take a minute)"
        with _working(message, quiet=args.json):
            inspection = inspect_task(task, device=args.device)
    if args.json:
        payload = task.model_dump()
        if inspection is not None:
            payload["inspection"] = inspection.model_dump()
        print(json.dumps(payload))
        return 0
    print(f"# {task.ref}  ({task.name})")
    for key, value in task.metadata.items():
        print(f"# {key}: {value}")
    print(task.code.rstrip())
    if inspection is not None:
        print("\n# inspection")
        _print_specs("init inputs", inspection.init_inputs)
        _print_specs("inputs", inspection.inputs)
        _print_specs("outputs", inspection.outputs)
        print(f"parameters:    {inspection.parameter_count:,}")
        print(f"deterministic: {inspection.deterministic}")
        print(f"input-dependent: {inspection.input_dependent}")
        print(f"eager forward: {inspection.forward_ms:.2f} ms on {inspection.device}")
    return 0


def cmd_judge(args: argparse.Namespace) -> int:
    from cuda_agent.judge import JudgeConfig, judge
    from cuda_agent.sandbox.workspace_commands import SANDBOX_TOKEN_ENV, SANDBOX_URL_ENV

    url = args.sandbox or os.environ.get(SANDBOX_URL_ENV) or None
    if not url:
        checked_device(args.device)  # a service checks its own machine
    task = catalog_from_args(args).resolve(args.task)
    overrides = {
        "device": args.device,
        "precision": args.precision,
        "time": not args.no_time,
        "verdict_cache": not args.no_verdict_cache,
    }
    if args.trials is not None:
        overrides["trials"] = args.trials
    overrides["policy"] = args.policy
    config = JudgeConfig(**overrides)
    solution = Path(args.solution)
    if url:
        token = args.token or os.environ.get(SANDBOX_TOKEN_ENV) or None
        verdict = _judge_on_service(url, token, task, solution, config, quiet=args.json)
    else:
        with _working(f"judging {solution} on {task.ref} (a first build takes about a minute)", quiet=args.json):
            verdict = judge(task, solution, config)
    if "candidate_isolation" in verdict.env:  # the candidate ran without the isolation it should have had
        print(f"warning: {verdict.env['candidate_isolation']}", file=sys.stderr)
    if args.json:
        print(verdict.model_dump_json())
        return 0
    _print_verdict(verdict)
    return 0


def _judge_on_service(
    url: str, token: str | None, task: Task, solution: Path, config: JudgeConfig, quiet: bool
) -> Verdict:
    """The verdict of a running `cuda-agent serve`: its pool keeps workers started ahead and its caches warm, so a
    judgement there skips this process's start of torch and CUDA (9-12 s on the H200: bench/results/h200-2026-12-05-b/)."""
    from cuda_agent.sandbox.client import SandboxClient

    with SandboxClient(url, token=token) as client, _working(f"judging {solution} on {task.ref} at {url}", quiet=quiet):
        if solution.is_dir():  # read by path: the service must see it below its --workspace-root
            return client.judge_workspace(task, solution.resolve(), config)
        try:
            source = solution.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read the solution {solution}: {exc}") from exc
        return client.judge(task, source, config)


def cmd_workspace_create(args: argparse.Namespace) -> int:
    from cuda_agent.machine import detect_device
    from cuda_agent.workspace import create_workspace

    task = catalog_from_args(args).resolve(args.task)
    device = detect_device(args.device)
    root = create_workspace(task, Path(args.dir), device=device, force=args.force, language=args.lang)
    print(f"workspace for {task.ref} ({device}, {args.lang}) at {root}")
    print(f"next: cd {root} && cat SKILL.md; bash utils/compile.sh; python -m utils.verification")
    return 0


def cmd_view(args: argparse.Namespace) -> int:
    from cuda_agent.agent.view import write_view

    output = args.output or args.trajectory.with_suffix(".html")
    print(write_view(args.trajectory, output))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from cuda_agent.sandbox.limits import SandboxLimits
    from cuda_agent.sandbox.service import check_bind, make_workspace_root, serve

    check_bind(args.host, args.token)
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port {args.port}: give a port from 1 to 65535 (0: any free one)")
    if args.spares < 0:
        raise ConfigError(f"--spares {args.spares}: give 0 (none) or more")
    if args.prepare_spares is not None and args.prepare_spares < 0:
        raise ConfigError(f"--prepare-spares {args.prepare_spares}: give 0 (none) or more")
    make_workspace_root(args.workspace_root)
    limits = SandboxLimits(max_pids=args.max_pids, address_space_bytes=int(args.address_space_gb * 2**30))
    if args.pool == "ray":
        from cuda_agent.sandbox.ray_pool import RayPool

        pool = RayPool(
            address=args.ray_address,
            cpu_actors=args.workers or 2,
            max_pending=args.max_pending,
            limits=limits,
            spares=args.spares,
        )
    else:
        from cuda_agent.sandbox.local import LocalPool

        pool = LocalPool(
            build_workers=args.workers,
            cpu_timing_slots=args.cpu_timing_slots,
            max_pending=args.max_pending,
            limits=limits,
            spares=args.spares,
            prepare_spares=args.prepare_spares,
        )
    print(f"cuda-agent sandbox ({args.pool} pool) on http://{args.host}:{args.port}", file=sys.stderr, flush=True)
    try:
        serve(
            pool,
            host=args.host,
            port=args.port,
            token=args.token,
            defaults={"policy": args.policy},
            workspace_root=args.workspace_root,
        )
    finally:
        pool.close()
    return 0


def run_agent_episode(task, model, device: str, out: Path, max_turns: int, language: str = "cuda"):
    """One episode as `solve` and `demo` run it: the one episode runner, judged by a local sandbox pool.

    Raises:
        InfraError: the judgement failed for a reason of ours (main() prints one line and exits 3).
    """
    from cuda_agent.agent import ReplayModel
    from cuda_agent.agent.episode import run_task_episode
    from cuda_agent.agent.loop import EpisodeConfig
    from cuda_agent.sandbox import LocalPool
    from cuda_agent.sandbox.service import local_service

    if isinstance(model, ReplayModel) and model.mismatch(task.ref):
        print(model.mismatch(task.ref), file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    with LocalPool() as pool, local_service(pool, out.resolve()) as env:  # the workspace's tools judge on this pool
        judge = _Announced(pool)
        config = EpisodeConfig(max_turns=max_turns)
        return run_task_episode(task, model, judge, out, device, config, env=env, on_turn=_show_turn, language=language)


class _Announced:
    """A pool's `judge_workspace` that says what it is judging first (a judgement takes a while)."""

    def __init__(self, pool) -> None:
        self.pool = pool

    def judge_workspace(self, task, workspace: Path, config=None):
        print(f"judging {workspace} in the sandbox ...", flush=True)
        return self.pool.judge_workspace(task, workspace, config)


def _show_turn(turn) -> None:
    """One line per turn: the tools called, their first line of output, and how long they took."""
    import json as _json

    if not turn.tool_calls:
        print(f"turn {turn.index + 1:3d}  finish: {turn.content[:100]}", flush=True)
        return
    for call, result in zip(turn.tool_calls, turn.tool_results, strict=False):
        try:
            args = _json.loads(call.arguments)
        except ValueError:
            args = {}
        what = args.get("command") or args.get("path") or args.get("pattern") or ""
        first = next((line for line in reversed(result.output.splitlines()) if line.strip()), "")
        mark = "x" if result.is_error else "ok"
        print(f"turn {turn.index + 1:3d}  {call.name:9s} {what[:50]:50s} {mark:2s} {first[:70]}", flush=True)
    if turn.tools_s > 1:
        print(f"          ({turn.model_s:.1f} s model, {turn.tools_s:.1f} s tools)", flush=True)


def _report_episode(result, out: Path) -> None:
    from cuda_agent.agent.view import write_view

    html = write_view(result.trajectory, out / "trajectory.html")
    verdict = result.verdict
    print(f"episode: {result.exit_status} after {result.turns} turns")
    cached = " (from the verdict cache)" if verdict.env.get("verdict_cached") else ""
    print(f"verdict: {verdict.verdict}  reward: {verdict.reward}  {verdict.message}{cached}")
    timings = verdict.timings_ms.model_dump()
    if timings.get("solution"):
        times = [f"{name} {timings[name]:.4g}" for name in ("solution", "eager", "compile") if timings.get(name)]
        print(f"times (ms): {', '.join(times)}")
    print(f"trajectory: {result.trajectory}\nview: {html}")


def cmd_solve(args: argparse.Namespace) -> int:
    from cuda_agent.agent import get_model

    device = checked_device(args.device)
    task = catalog_from_args(args).resolve(args.task)
    out = Path(args.out or Path("runs") / task.ref.replace("/", "_"))
    result = run_agent_episode(task, get_model(args.model), device, out, args.max_turns, args.lang)
    _report_episode(result, out)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from cuda_agent.agent import ReplayModel, get_model
    from cuda_agent.agent.demo import demo_recording

    device = checked_device(args.device)
    out = Path(args.out)
    if args.model:
        task = catalog_from_args(args).resolve(args.task)
        print(f"demo: a live model ({args.model}) on {task.ref}, {device}")
        model = get_model(args.model)
    else:
        recording, device, note = demo_recording(device)
        task = catalog_from_args(args).resolve(args.task)
        print(f"demo: replaying a recorded episode (no model is bundled) on {task.ref}, {device}. {note}")
        print("The workspace, builds, tools and judge are real; only the model's replies are recorded.")
        model = ReplayModel.from_file(recording)
    result = run_agent_episode(task, model, device, out, args.max_turns)
    _report_episode(result, out)
    return 0 if result.reward is not None and result.reward > 0 else 1


def _parse_judge_overrides(pairs: list[str]) -> dict:
    """`--judge key=value` pairs as JudgeConfig fields (values parsed as JSON where they parse)."""

    overrides = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ConfigError(f"--judge {pair}: write KEY=VALUE, e.g. --judge target_phase_s=0.2")
        try:
            overrides[key] = json.loads(value)
        except ValueError:
            overrides[key] = value
    return overrides


def cmd_bench(args: argparse.Namespace) -> int:
    from cuda_agent.evaluation.baselines import seed_cache
    from cuda_agent.evaluation.bench import run_bench, write_reports
    from cuda_agent.evaluation.records import BenchConfig
    from cuda_agent.sandbox import LocalPool

    checked_device(args.device)
    if args.baselines is not None:
        print(f"seeded {seed_cache(args.baselines)} baselines from {args.baselines}")
    config = BenchConfig(
        suite=args.suite,
        levels=[int(x) for x in args.levels.split(",")] if args.levels else None,
        solutions=args.solutions,
        model=args.model,
        device=args.device,
        workers=args.workers,
        max_turns=args.max_turns,
        language=args.lang,
        judge=_parse_judge_overrides(args.judge) | ({"policy": args.policy} if args.policy else {}),
        speed_of_light=not args.no_speed_of_light,
    )
    model_factory = None
    if args.model:
        from cuda_agent.agent import get_model

        model_factory = lambda: get_model(args.model)  # noqa: E731
    out = Path(args.out)
    with LocalPool(build_workers=args.workers) as pool:
        report = run_bench(config, out, pool, model_factory, resume=args.resume, catalog=catalog_from_args(args))
    for path in write_reports(report, out):
        print(f"wrote {path}")
    m = report.metrics.overall
    speedup = f"{m.geomean_speedup_compile:.2f}x" if m.geomean_speedup_compile else "n/a"
    print(f"pass {m.pass_rate:.1%}, faster than compile {m.faster_than_compile:.1%}, speedup vs compile {speedup}")
    return 0


def cmd_bench_baselines(args: argparse.Namespace) -> int:
    from cuda_agent.evaluation.baselines import measure
    from cuda_agent.evaluation.suites import select_tasks
    from cuda_agent.judge import JudgeConfig

    device = checked_device(args.device)
    tasks = select_tasks(
        args.suite, [int(x) for x in args.levels.split(",")] if args.levels else None, catalog_from_args(args)
    )
    config = JudgeConfig(device=device, **_parse_judge_overrides(args.judge))

    def show(entry) -> None:
        times = f"eager {entry.eager_ms} ms, compile {entry.compile_ms} ms" if entry.error is None else entry.error
        print(f"{entry.ref}: {times} ({entry.wall_s:.0f} s)", flush=True)

    data = measure(tasks, Path(args.out), config, device, on_done=show, workers=args.workers)
    print(f"{len(data.entries)} tasks in {args.out}")
    return 0


def cmd_bench_report(args: argparse.Namespace) -> int:
    from cuda_agent.evaluation.bench import load_report, write_reports

    for path in write_reports(load_report(Path(args.dir)), Path(args.dir)):
        print(f"wrote {path}")
    return 0


def cmd_bench_seed(args: argparse.Namespace) -> int:
    from cuda_agent.evaluation.baselines import seed_cache

    for path in args.file:
        print(f"{path}: seeded {seed_cache(Path(path))} baselines into the judge's cache")
    return 0


def _print_verdict(verdict) -> None:
    colour = "green" if verdict.verdict == "pass" else "red"
    from rich.console import Console

    console = Console()
    console.print(f"[bold {colour}]{verdict.verdict}[/] reward={verdict.reward}  {verdict.task} on {verdict.device}")
    if verdict.message:
        console.print(verdict.message, markup=False)
    for v in verdict.violations:
        console.print(f"  [{v.check}] {v.message}", markup=False)
    if verdict.compile_log:
        console.print(verdict.compile_log, markup=False)
    t = verdict.timings_ms
    if t.solution is not None:
        parts = [
            f"solution {t.solution:.4g} ms",
            f"eager {t.eager:.4g} ms" if t.eager else "eager n/a",
            f"compile {t.compile:.4g} ms" if t.compile else "compile n/a",
        ]
        console.print("  " + ", ".join(parts))
        if verdict.speedup_vs_eager:
            console.print(
                f"  speedup: {verdict.speedup_vs_eager:.3f}x vs eager, "
                + (f"{verdict.speedup_vs_compile:.3f}x vs compile" if verdict.speedup_vs_compile else "")
            )
    # soft_wrap: the terminal wraps a long line; rich would break it mid-list (and hard, in a pipe).
    console.print("  stages: " + ", ".join(f"{k} {v:.1f}s" for k, v in verdict.stage_s.items()), soft_wrap=True)


def _print_specs(label: str, specs: list) -> None:
    parts = [f"{s.dtype.removeprefix('torch.')}{s.shape}" if s.kind == "tensor" else s.repr for s in specs]
    print(f"{label + ':':<14} {', '.join(parts) if parts else '(none)'}")


def _add_episode_commands(commands: argparse._SubParsersAction) -> None:
    solve = commands.add_parser("solve", help="run one agent episode on a task with a model")
    solve.add_argument("task", help="task reference (kernelbench/L1/19, examples/relu, a .py path, ...)")
    solve.add_argument(
        "--model", required=True, help="http(s) base URL of an OpenAI-compatible server, hf:PATH, or replay:FILE"
    )
    solve.add_argument("--out", default=None, help="folder for the workspace, trajectory and view (default runs/TASK)")
    solve.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"], help="CUDA or CPU kernels")
    solve.add_argument("--max-turns", type=int, default=200, help="turn limit (paper: 150 training, 200 evaluation)")
    solve.add_argument("--lang", default="cuda", choices=LANGUAGES, help=_LANG_HELP)
    solve.set_defaults(func=cmd_solve)

    demo = commands.add_parser("demo", help="replay a recorded episode through the real workspace and judge")
    demo.add_argument("--model", default=None, help="run a live model instead (an OpenAI-compatible base URL, hf:PATH)")
    demo.add_argument("--task", default="examples/relu", help="task of a live demo (the replay is for examples/relu)")
    demo.add_argument("--out", default="runs/demo", help="folder for the workspace, trajectory and view")
    demo.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"], help="CUDA or CPU kernels")
    demo.add_argument("--max-turns", type=int, default=200, help="turn limit")
    demo.set_defaults(func=cmd_demo)


POLICY_CHOICES = ("cuda-agent", "kernelbench")
_POLICY_HELP = "rules: cuda-agent (SKILL.md's, the default) or kernelbench (torch may mix with your own kernels)"
_LANG_HELP = "kernel language the agent writes: cuda (C++/CUDA in kernels/) or triton (@triton.jit in model_new.py)"
_SUITE_HELP = "kernelbench, kernelbench/L2, ops6k[0:100] (a slice of the rows), examples, or a folder of problems"


def _add_bench_commands(commands: argparse._SubParsersAction) -> None:
    bench = commands.add_parser(
        "bench",
        help="KernelBench evaluation: judge solutions or run the agent on a suite; results.json, report.md/html",
        description="Solution files: level_{L}_problem_{P}*.py or L{L}/{P}.py (KernelBench tasks), <name>.py "
        "(other tasks, e.g. relu.py for examples/relu). A task without one counts as failed.",
    )
    bench.add_argument("--suite", default=None, help=_SUITE_HELP)
    what = bench.add_mutually_exclusive_group()
    what.add_argument("--model", default=None, help="run the agent: OpenAI-compatible base URL, hf:PATH, replay:FILE")
    what.add_argument("--solutions", default=None, help="judge a folder of solutions ('examples': the bundled ones)")
    bench.add_argument("--out", default=None, help="run folder: results.jsonl, results.json, report.md, report.html")
    bench.add_argument("--levels", default=None, help="comma-separated KernelBench levels, e.g. 1,2")
    bench.add_argument("--workers", type=int, default=2, help="parallel builds (or episodes); timing stays exclusive")
    bench.add_argument("--resume", action="store_true", help="carry on a run in --out, skipping finished tasks")
    bench.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"], help="CUDA or CPU kernels")
    bench.add_argument("--max-turns", type=int, default=200, help="turn limit per episode (paper: 200 in evaluation)")
    bench.add_argument(
        "--lang", default="cuda", choices=LANGUAGES, help=_LANG_HELP + " (with --model; or which --solutions examples)"
    )
    bench.add_argument("--judge", action="append", default=[], metavar="KEY=VALUE", help="JudgeConfig field override")
    bench.add_argument("--policy", default=None, choices=POLICY_CHOICES, help=_POLICY_HELP)
    bench.add_argument("--baselines", type=Path, default=None, help="seed the baseline cache from this file first")
    bench.add_argument("--no-speed-of-light", action="store_true", help="skip the speed-of-light bounds")
    bench.set_defaults(func=_bench_main)
    sub = bench.add_subparsers(dest="bench_command")
    base = sub.add_parser("baselines", help="measure eager/compile baselines of a suite into a JSON file (resumable)")
    base.add_argument("--suite", default="kernelbench", help=_SUITE_HELP)
    base.add_argument("--levels", default=None, help="comma-separated KernelBench levels, e.g. 1")
    base.add_argument("--out", required=True, help="JSON data file; an existing one is carried on")
    base.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"], help="where to time")
    base.add_argument("--judge", action="append", default=[], metavar="KEY=VALUE", help="JudgeConfig field override")
    base.add_argument(
        "--workers", type=int, default=1, help="baseline processes at once; they take turns to time (a lock file)"
    )
    base.set_defaults(func=cmd_bench_baselines)
    seed = sub.add_parser("seed-cache", help="copy a baselines file (or cache folder) into the judge's baseline cache")
    seed.add_argument(
        "file",
        nargs="+",
        help="files written by `cuda-agent bench baselines`, or folders of baseline cache files (<key>.json)",
    )
    seed.set_defaults(func=cmd_bench_seed)
    report = sub.add_parser("report", help="render report.md and report.html again from a run's results.json")
    report.add_argument("dir", help="the run folder")
    report.set_defaults(func=cmd_bench_report)


def _bench_main(args: argparse.Namespace) -> int:

    if args.suite is None or args.out is None or (args.model is None) == (args.solutions is None):
        raise ConfigError("bench needs --suite, --out and one of --model or --solutions (see cuda-agent bench -h)")
    return cmd_bench(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cuda-agent", description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=None, help="folder holding kernelbench/ and ops6k/ data")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    commands = parser.add_subparsers(dest="command", required=True)

    _add_task_commands(commands)

    judge = commands.add_parser("judge", help="judge one candidate solution against a task")
    judge.add_argument("task", help="task reference (kernelbench/L1/19, examples/relu, a .py path, ...)")
    judge.add_argument("solution", help="a single-file ModelNew solution or a workspace folder")
    judge.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"], help="where to run")
    judge.add_argument("--precision", default="strict", choices=["strict", "paper"], help="precision mode")
    judge.add_argument("--trials", type=int, default=None, help="correctness trials (default 5)")
    judge.add_argument("--no-time", action="store_true", help="check correctness only")
    judge.add_argument("--policy", default="cuda-agent", choices=POLICY_CHOICES, help=_POLICY_HELP)
    judge.add_argument("--json", action="store_true", help="print exactly one JSON verdict")
    judge.add_argument(
        "--no-verdict-cache", action="store_true", help="judge again even if this candidate was judged before"
    )
    judge.add_argument(
        "--sandbox",
        default=None,
        metavar="URL",
        help="judge on this `cuda-agent serve` (default $CUDA_AGENT_SANDBOX_URL): its workers are started ahead",
    )
    judge.add_argument("--token", default=None, help="the service's token (default $CUDA_AGENT_SANDBOX_TOKEN)")
    judge.set_defaults(func=cmd_judge)

    _add_serve_command(commands)

    view = commands.add_parser("view", help="render a trajectory as a self-contained HTML page")
    view.add_argument("trajectory", type=Path, help="trajectory .jsonl file written by an episode")
    view.add_argument("-o", "--output", type=Path, default=None, help="HTML file to write (default: beside it)")
    view.set_defaults(func=cmd_view)

    workspace = commands.add_parser("workspace", help="the agent's workspace").add_subparsers(
        dest="workspace", required=True
    )
    create = workspace.add_parser("create", help="lay out a workspace for a task")
    create.add_argument("task", help="task reference (kernelbench/L1/19, examples/relu, a .py path, ...)")
    create.add_argument("dir", help="folder to create")
    create.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"], help="CUDA or CPU kernels")
    create.add_argument("--force", action="store_true", help="replace the folder's contents")
    create.add_argument("--lang", default="cuda", choices=LANGUAGES, help=_LANG_HELP)
    create.set_defaults(func=cmd_workspace_create)

    _add_episode_commands(commands)
    _add_bench_commands(commands)
    add_synth_command(commands)
    add_train_command(commands)
    add_plan_command(commands)
    return parser


def _add_serve_command(commands: argparse._SubParsersAction) -> None:
    serve = commands.add_parser("serve", help="serve the sandbox pool over HTTP (judge, workspace commands, metrics)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (anything but loopback needs --token)")
    serve.add_argument("--port", type=int, default=8000, help="port")
    serve.add_argument(
        "--token",
        default=None,
        help="require 'Authorization: Bearer TOKEN' on every request but GET /health, which stays open for "
        "load balancers and says only that the service is up",
    )
    serve.add_argument("--pool", default="local", choices=["local", "ray"], help="local processes or Ray actors")
    serve.add_argument("--workers", type=int, default=None, help="build workers (local; default: CPU count)")
    serve.add_argument("--cpu-timing-slots", type=int, default=1, help="timing slots without a GPU (local)")
    serve.add_argument(
        "--spares",
        type=int,
        default=1,
        help="judge stages each timing slot (local) or actor (ray) "
        "keeps started ahead (0: none; more when a start outlasts a judgement)",
    )
    serve.add_argument(
        "--prepare-spares",
        type=int,
        default=None,
        help="prepare stages (a build's child with torch "
        "imported) the build workers keep started ahead (local; default: --spares with GPUs, else 0)",
    )
    serve.add_argument(
        "--max-pending", type=int, default=None, help="queue size (default: 64 a worker, at least 256); then 503"
    )
    serve.add_argument("--max-pids", type=int, default=512, help="processes per job")
    serve.add_argument("--address-space-gb", type=float, default=16, help="address space per process (not on CUDA)")
    serve.add_argument(
        "--policy", default="cuda-agent", choices=POLICY_CHOICES, help=_POLICY_HELP + " (a request's config wins)"
    )
    serve.add_argument(
        "--workspace-root",
        type=Path,
        default=None,
        help="requests may name workspaces, problem files and command folders below this folder, created if missing "
        "(default: none, source text only)",
    )
    serve.add_argument("--ray-address", default=None, help="Ray cluster address (default: start a local Ray)")
    serve.set_defaults(func=cmd_serve)


def _add_task_commands(commands: argparse._SubParsersAction) -> None:
    tasks = commands.add_parser("tasks", help="list and inspect problems").add_subparsers(dest="tasks", required=True)
    listing = tasks.add_parser("list", help="list the tasks of a set")
    listing.add_argument("source", nargs="?", default="kernelbench", help="kernelbench, ops6k, examples or a path")
    listing.add_argument("--level", type=int, default=None, help="only this KernelBench level")
    listing.add_argument("--json", action="store_true", help="print a JSON list")
    listing.set_defaults(func=cmd_tasks_list)
    show = tasks.add_parser("show", help="print one task, optionally running it in a child process")
    show.add_argument("ref", help="kernelbench/L1/19, ops6k/123, examples/relu or a .py path")
    show.add_argument("--inspect", action="store_true", help="run the task once and report shapes and dtypes")
    show.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="device for --inspect")
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(func=cmd_tasks_show)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    try:
        return args.func(args)
    except ServiceUnreachableError as exc:  # a URL the user named (--sandbox, $CUDA_AGENT_SANDBOX_URL) and must check
        print(f"error: {exc}".replace("\n", " "), file=sys.stderr)
        return 2
    except InfraError as exc:  # ours, not the input's nor the candidate's: no verdict, no reward
        print(f"error (ours, not the candidate's; try again): {exc}".replace("\n", " "), file=sys.stderr)
        return EXIT_OURS
    except Error as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
