"""The `cuda-agent` command line: thin commands that wire the library's parts together.

Run `cuda-agent --help` for the list of commands. This module (with `recipes/`) is the only
place that picks concrete classes and configures logging.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from cuda_agent.errors import Error


def _catalog(args: argparse.Namespace):
    from cuda_agent.tasks import Catalog

    return Catalog(data_dir=args.data_dir)


def cmd_tasks_list(args: argparse.Namespace) -> int:
    tasks = _catalog(args).tasks(args.source)
    if args.level is not None:
        tasks = [t for t in tasks if t.level == args.level]
    if args.json:
        rows = [{"ref": t.ref, "name": t.name, "level": t.level, "source": t.source, **t.metadata} for t in tasks]
        print(json.dumps(rows))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{args.source}: {len(tasks)} tasks")
    for column in ("ref", "name", "level", "ops"):
        table.add_column(column)
    for t in tasks:
        ops = ", ".join(t.metadata.get("ops", []))
        table.add_row(t.ref, t.name, "" if t.level is None else str(t.level), ops)
    Console().print(table)
    return 0


def cmd_tasks_show(args: argparse.Namespace) -> int:
    from cuda_agent.tasks.inspection import inspect_task

    task = _catalog(args).resolve(args.ref)
    inspection = inspect_task(task, device=args.device) if args.inspect else None
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

    task = _catalog(args).resolve(args.task)
    overrides = {"device": args.device, "precision": args.precision, "time": not args.no_time}
    if args.trials is not None:
        overrides["trials"] = args.trials
    config = JudgeConfig(**overrides)
    verdict = judge(task, Path(args.solution), config)
    if args.json:
        print(verdict.model_dump_json())
        return 0
    _print_verdict(verdict)
    return 0


def cmd_workspace_create(args: argparse.Namespace) -> int:
    from cuda_agent.judge.pipeline import detect_device
    from cuda_agent.workspace import create_workspace

    task = _catalog(args).resolve(args.task)
    device = detect_device(args.device)
    root = create_workspace(task, Path(args.dir), device=device, force=args.force)
    print(f"workspace for {task.ref} ({device}) at {root}")
    print(f"next: cd {root} && cat SKILL.md; bash utils/compile.sh; python -m utils.verification")
    return 0


def cmd_view(args: argparse.Namespace) -> int:
    from cuda_agent.agent.view import write_view

    output = args.output or args.trajectory.with_suffix(".html")
    print(write_view(args.trajectory, output))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from cuda_agent.sandbox.limits import SandboxLimits
    from cuda_agent.sandbox.service import check_bind, serve

    check_bind(args.host, args.token)
    limits = SandboxLimits(max_pids=args.max_pids, address_space_bytes=int(args.address_space_gb * 2**30))
    if args.pool == "ray":
        from cuda_agent.sandbox.ray_pool import RayPool

        pool = RayPool(
            address=args.ray_address, cpu_actors=args.workers or 2, max_pending=args.max_pending, limits=limits
        )
    else:
        from cuda_agent.sandbox.local import LocalPool

        pool = LocalPool(
            build_workers=args.workers,
            cpu_timing_slots=args.cpu_timing_slots,
            max_pending=args.max_pending,
            limits=limits,
        )
    print(f"cuda-agent sandbox ({args.pool} pool) on http://{args.host}:{args.port}", file=sys.stderr, flush=True)
    try:
        serve(pool, host=args.host, port=args.port, token=args.token)
    finally:
        pool.close()
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
    console.print("  stages: " + ", ".join(f"{k} {v:.1f}s" for k, v in verdict.stage_s.items()))


def _print_specs(label: str, specs: list) -> None:
    parts = [f"{s.dtype.removeprefix('torch.')}{s.shape}" if s.kind == "tensor" else s.repr for s in specs]
    print(f"{label + ':':<14} {', '.join(parts) if parts else '(none)'}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cuda-agent", description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=None, help="folder holding kernelbench/ and ops6k/ data")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    commands = parser.add_subparsers(dest="command", required=True)

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

    judge = commands.add_parser("judge", help="judge one candidate solution against a task")
    judge.add_argument("task", help="task reference (kernelbench/L1/19, examples/relu, a .py path, ...)")
    judge.add_argument("solution", help="a single-file ModelNew solution or a workspace folder")
    judge.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"], help="where to run")
    judge.add_argument("--precision", default="strict", choices=["strict", "paper"], help="precision mode")
    judge.add_argument("--trials", type=int, default=None, help="correctness trials (default 5)")
    judge.add_argument("--no-time", action="store_true", help="check correctness only")
    judge.add_argument("--json", action="store_true", help="print exactly one JSON verdict")
    judge.set_defaults(func=cmd_judge)

    serve = commands.add_parser("serve", help="serve the sandbox pool over HTTP (judge, workspace commands, metrics)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (anything but loopback needs --token)")
    serve.add_argument("--port", type=int, default=8000, help="port")
    serve.add_argument("--token", default=None, help="require 'Authorization: Bearer TOKEN' on every request")
    serve.add_argument("--pool", default="local", choices=["local", "ray"], help="local processes or Ray actors")
    serve.add_argument("--workers", type=int, default=None, help="build workers (local; default: CPU count)")
    serve.add_argument("--cpu-timing-slots", type=int, default=1, help="timing slots without a GPU (local)")
    serve.add_argument("--max-pending", type=int, default=256, help="queue size; beyond it requests get 503")
    serve.add_argument("--max-pids", type=int, default=512, help="processes per job")
    serve.add_argument("--address-space-gb", type=float, default=16, help="address space per process (not on CUDA)")
    serve.add_argument("--ray-address", default=None, help="Ray cluster address (default: start a local Ray)")
    serve.set_defaults(func=cmd_serve)

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
    create.set_defaults(func=cmd_workspace_create)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    try:
        return args.func(args)
    except Error as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
