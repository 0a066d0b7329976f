"""The workspace's protected tools: `bash utils/compile.sh`, `python -m utils.verification`,
`python -m utils.profiling`. The files in `utils/` are two-line shims; the logic lives here.

Each runs in the workspace folder, reads the task from the record `create_workspace` wrote, and
trusts nothing else there: read-only files are compared with the package's copies first (a
change is reported as `rejected`), builds use the package's glue, and verification and
profiling are the judge itself on the workspace as a solution. Output is short and plain, for a
model to read: one line per check, the first error or mismatch, no tracebacks. What a program reads
is the check each of them records (workspace/checks.py: verdict, reward and the digest of the
kernels checked) in the file the episode runner names in CUDA_AGENT_CHECKS_FILE; the agent loop
snapshots from that, never from this printout.

With `CUDA_AGENT_SANDBOX_URL` set (and `CUDA_AGENT_SANDBOX_TOKEN` where the service wants one),
verification and profiling are judged by that `cuda-agent serve` service, which reads the workspace
by path (so it must see the same file system, below its `--workspace-root`): the paper's split, where compiles run beside the
agent and correctness and timing on the sandbox pool's GPUs. Compiling stays local.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Literal

from cuda_agent.errors import Error
from cuda_agent.judge import (
    JudgeConfig,
    compile_triton,
    compile_workspace,
    judge,
    prepare,
    reference_timings,
    trim_compile_log,
)
from cuda_agent.types import Task, Verdict
from cuda_agent.workspace import read_task_record, tampered_files, workspace_language
from cuda_agent.workspace.checks import WorkspaceCheck, editable_digest, record_check

SANDBOX_URL_ENV, SANDBOX_TOKEN_ENV = "CUDA_AGENT_SANDBOX_URL", "CUDA_AGENT_SANDBOX_TOKEN"


def _judge(task: Task, root: Path, config: JudgeConfig) -> Verdict:
    """The judge's verdict on the workspace, from the sandbox service when one is named, else here."""
    url = os.environ.get(SANDBOX_URL_ENV)
    if not url:
        return judge(task, root, config)
    from cuda_agent.sandbox.client import SandboxClient

    with SandboxClient(url, token=os.environ.get(SANDBOX_TOKEN_ENV) or None) as client:
        return client.judge_workspace(task, root.resolve(), config)


def _checked(tool: Literal["verification", "profiling"], task: Task, root: Path, config: JudgeConfig) -> Verdict:
    """`_judge`, and the check recorded for the agent loop (checks.py): the loop reads this, not the printout."""
    digest = editable_digest(root)  # the kernels judged: taken first, so a later edit cannot borrow the result
    verdict = _judge(task, root, config)
    check = WorkspaceCheck(
        tool=tool, verdict=verdict.verdict, correct=verdict.correct, reward=verdict.reward, digest=digest
    )
    record_check(check)
    return verdict


def _load(root: Path, tool: str) -> tuple[Task, str] | None:
    try:
        task, device = read_task_record(root)
    except Error as exc:
        print(f"{tool}: {exc}")
        return None
    changed = tampered_files(root, task)
    if changed:
        print(f"{tool}: REJECTED: read-only files were changed: {', '.join(changed)}")
        print("Restore them (the judge rejects any change); edit only model_new.py and kernels/.")
        return None
    return task, device


def compile_command(argv: list[str], root: Path | None = None) -> int:
    """Build kernels/ incrementally; print 'compile: OK ...' or the first compiler error."""
    argparse.ArgumentParser(prog="bash utils/compile.sh", description="build kernels/").parse_args(argv)
    root = root or Path.cwd()
    loaded = _load(root, "compile")
    if loaded is None:
        return 1
    task, device = loaded
    if workspace_language(root) == "triton":
        return _check_triton(task, root, device)
    outcome = compile_workspace(root, device)  # as a user id of its own where we are root
    if outcome.ok:
        print(
            f"compile: OK in {outcome.wall_s:.1f} s ({outcome.compiled} of {outcome.units} files recompiled); "
            "`import cuda_extension` now finds your functions"
        )
        return 0
    print("compile: TIMEOUT" if outcome.timed_out else "compile: FAILED")
    print(outcome.log if outcome.timed_out else trim_compile_log(outcome.log))
    return 1


def _check_triton(task: Task, root: Path, device: str) -> int:
    """A Triton workspace's compile: the judge's static rules on model_new.py, then every kernel forward launches
    compiled for the GPU (none run: `compile_triton`), with the compiler's first error as nvcc's is shown."""
    verdict = prepare(task, root, JudgeConfig(device=device, verdict_cache=False))
    if verdict is not None:
        print(f"compile: {verdict.verdict.upper()}: {verdict.message}")
        for violation in verdict.violations[1:]:
            print(f"  {violation.check}: {violation.message}")
        return 1
    result = compile_triton(task, root / "model_new.py", device)
    if result.status == "ok":
        if not result.kernels:
            print("compile: REJECTED: forward launched no Triton kernel on get_inputs()")
            return 1
        print(
            f"compile: OK in {result.wall_s:.1f} s: {', '.join(result.kernels)} compiled for {result.target} at "
            "get_inputs()'s shapes; none ran (`python -m utils.verification` runs them)"
        )
        return 0
    print({"compile_error": "compile: FAILED", "timeout": "compile: TIMEOUT"}.get(result.status, "compile: ERROR"))
    print(result.message)
    return 1


def _print_checks(verdict: Verdict) -> None:
    if verdict.compile_log:
        print("[FAIL] build")
        print(verdict.compile_log)
        return
    if "build" in verdict.stage_s:
        print("[pass] static rules")
        took = "cached" if verdict.env.get("build_cached") else f"{verdict.stage_s['build']:.1f} s"
        print(f"[pass] build ({took})")
    for check in verdict.checks:
        name = f"{check.get('label', 'trial')} seed={check.get('seed')} ({check.get('transform', 'identity')})"
        if check.get("skipped"):
            print(f"[skip] {name}: {check['skipped']}")
            continue
        outputs = check.get("outputs") or []
        errs = [o.get("max_abs_err") for o in outputs if o.get("max_abs_err") is not None]
        figure = f", max abs err {max(errs):.3g}" if errs else ""
        if check.get("ok"):
            print(f"[pass] {name}{figure}")
            continue
        print(f"[FAIL] {name}: {check.get('reason', '')}")
        for output in outputs:
            if output.get("first_mismatch"):
                print(f"       first mismatch {output['first_mismatch']}")
                break


def _print_verdict(tool: str, verdict: Verdict) -> None:
    _print_checks(verdict)
    for violation in verdict.violations:
        print(f"[FAIL] rule {violation.check}: {violation.message}")
    state = "PASS" if verdict.correct else verdict.verdict.upper()
    detail = "" if verdict.correct or verdict.violations or verdict.compile_log else f": {verdict.message}"
    print(f"{tool}: {state}{detail}")


def verification_command(argv: list[str], root: Path | None = None) -> int:
    """Static rules, build, and every correctness trial of the judge; exit 0 only on PASS."""
    parser = argparse.ArgumentParser(prog="python -m utils.verification", description="check the solution")
    parser.parse_args(argv)
    root = root or Path.cwd()
    loaded = _load(root, "verification")
    if loaded is None:
        return 1
    task, device = loaded
    try:
        verdict = _checked("verification", task, root, JudgeConfig(device=device, time=False))
    except Error as exc:  # the sandbox service refused or is unreachable: ours, said plainly
        print(f"verification: {exc}")
        return 1
    _print_verdict("verification", verdict)
    return 0 if verdict.correct else 1


def profiling_command(argv: list[str], root: Path | None = None) -> int:
    """Time the solution (after verifying it) against eager and torch.compile; print speedups and reward."""
    parser = argparse.ArgumentParser(prog="python -m utils.profiling", description="time the solution")
    parser.add_argument("--reference", action="store_true", help="time only the reference (eager, torch.compile)")
    args = parser.parse_args(argv)
    root = root or Path.cwd()
    loaded = _load(root, "profiling")
    if loaded is None:
        return 1
    task, device = loaded
    config = JudgeConfig(device=device)
    if args.reference:
        base = reference_timings(task, config)
        eager = base.eager["median_ms"] if base.eager else None
        compiled = base.compile["median_ms"] if base.compile else None
        print(f"profiling: reference on {device}: eager {_ms(eager)}, torch.compile {_ms(compiled)}")
        if base.compile_error:
            print(f"torch.compile failed here, so eager is the bar: {base.compile_error[:300]}")
        return 0
    try:
        verdict = _checked("profiling", task, root, config)
    except Error as exc:
        print(f"profiling: {exc}")
        return 1
    if verdict.verdict != "pass":
        _print_verdict("profiling", verdict)
        return 1
    t = verdict.timings_ms
    print(
        f"solution {_ms(t.solution)} | eager {_ms(t.eager)} ({_x(verdict.speedup_vs_eager)}) | "
        f"torch.compile {_ms(t.compile)} ({_x(verdict.speedup_vs_compile)})"
    )
    goal = (
        "goal reached"
        if verdict.reward == 3
        else "goal: more than 5% faster than torch.compile beyond noise (reward 3)"
    )
    print(f"profiling: reward {verdict.reward} ({goal})")
    return 0


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g} ms"


def _x(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def main(argv: list[str]) -> int:
    """`python -m cuda_agent.sandbox.workspace_commands TOOL [ARGS]`: what the workspace's `utils/` shims run."""
    tools = {"compile": compile_command, "verification": verification_command, "profiling": profiling_command}
    if not argv or argv[0] not in tools:
        print(f"usage: python -m cuda_agent.sandbox.workspace_commands {{{'|'.join(tools)}}} [ARGS]", file=sys.stderr)
        return 2
    return tools[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
