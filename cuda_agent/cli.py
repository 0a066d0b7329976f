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


def run_agent_episode(task, model, device: str, out: Path, max_turns: int):
    """Workspace + tools + model + sandbox scoring: one episode, as `solve` and `demo` run it."""
    import os

    from cuda_agent.agent.loop import EpisodeConfig, run_episode
    from cuda_agent.sandbox import JudgeJob, LocalPool
    from cuda_agent.workspace import create_workspace

    root = create_workspace(task, out / "workspace", device=device, force=True)
    # The agent's shell must find this interpreter as `python` (the utils/ commands need cuda_agent).
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    with LocalPool() as pool:

        def score(folder: Path) -> dict:
            print(f"judging {folder} in the sandbox ...", flush=True)
            result = pool.run(JudgeJob(task=task.code, solution=str(folder), config={"device": device}))
            if result.verdict is None:
                return {"verdict": "error", "reward": -1, "message": result.error or result.status}
            return result.verdict.model_dump(mode="json")

        config = EpisodeConfig(max_turns=max_turns)
        return run_episode(model, root, task.ref, out, score, config, on_turn=_show_turn)


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
    verdict = result.verdict or {}
    print(f"episode: {result.exit_status} after {result.turns} turns")
    print(f"verdict: {verdict.get('verdict')}  reward: {result.reward}  {verdict.get('message', '')}")
    timings = verdict.get("timings_ms") or {}
    if timings.get("solution"):
        print(
            f"times (ms): solution {timings['solution']:.4g}, eager {timings.get('eager')}, compile {timings.get('compile')}"
        )
    print(f"trajectory: {result.trajectory}\nview: {html}")


def cmd_solve(args: argparse.Namespace) -> int:
    from cuda_agent.agent import get_model
    from cuda_agent.judge.pipeline import detect_device

    task = _catalog(args).resolve(args.task)
    device = detect_device(args.device)
    out = Path(args.out or Path("runs") / task.ref.replace("/", "_"))
    result = run_agent_episode(task, get_model(args.model), device, out, args.max_turns)
    _report_episode(result, out)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from cuda_agent.agent import ReplayModel, get_model
    from cuda_agent.agent.demo import demo_recording
    from cuda_agent.judge.pipeline import detect_device

    device = detect_device(args.device)
    out = Path(args.out)
    if args.model:
        task = _catalog(args).resolve(args.task)
        print(f"demo: a live model ({args.model}) on {task.ref}, {device}")
        model = get_model(args.model)
    else:
        recording, device, note = demo_recording(device)
        task = _catalog(args).resolve(args.task)
        print(f"demo: replaying a recorded episode (no model is bundled) on {task.ref}, {device}. {note}")
        print("The workspace, builds, tools and judge are real; only the model's replies are recorded.")
        model = ReplayModel.from_file(recording)
    result = run_agent_episode(task, model, device, out, args.max_turns)
    _report_episode(result, out)
    return 0 if result.reward is not None and result.reward > 0 else 1


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


def _add_episode_commands(commands: argparse._SubParsersAction) -> None:
    solve = commands.add_parser("solve", help="run one agent episode on a task with a model")
    solve.add_argument("task", help="task reference (kernelbench/L1/19, examples/relu, a .py path, ...)")
    solve.add_argument(
        "--model", required=True, help="http(s) base URL of an OpenAI-compatible server, hf:PATH, or replay:FILE"
    )
    solve.add_argument("--out", default=None, help="folder for the workspace, trajectory and view (default runs/TASK)")
    solve.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"], help="CUDA or CPU kernels")
    solve.add_argument("--max-turns", type=int, default=200, help="turn limit (paper: 150 training, 200 evaluation)")
    solve.set_defaults(func=cmd_solve)

    demo = commands.add_parser("demo", help="replay a recorded episode through the real workspace and judge")
    demo.add_argument("--model", default=None, help="run a live model instead (an OpenAI-compatible base URL, hf:PATH)")
    demo.add_argument("--task", default="examples/relu", help="task of a live demo (the replay is for examples/relu)")
    demo.add_argument("--out", default="runs/demo", help="folder for the workspace, trajectory and view")
    demo.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"], help="CUDA or CPU kernels")
    demo.add_argument("--max-turns", type=int, default=200, help="turn limit")
    demo.set_defaults(func=cmd_demo)


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

    _add_episode_commands(commands)
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
