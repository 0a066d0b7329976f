"""Drive a workspace the way the agent does, and record what each protected tool printed and took.

    python bench/workspace_flow.py kernelbench/L1/19 solutions/workspaces/kernelbench_L1_19 --device cuda --out DIR

Creates a workspace for TASK, copies a solution's `model_new.py` and `kernels/` into it, then runs
`bash utils/compile.sh`, `python -m utils.verification`, `python -m utils.profiling` and
`cuda-agent judge TASK WORKSPACE --json` as subprocesses in the workspace; writes
workspace_flow.json (commands, exit codes, seconds, output) under DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cuda_agent.tasks import Catalog  # noqa: E402
from cuda_agent.workspace import create_workspace  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task")
    parser.add_argument("solution", type=Path, help="folder with model_new.py and kernels/")
    parser.add_argument("--device", choices=["cuda", "cpu"], required=True)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    task = Catalog().resolve(args.task)
    root = create_workspace(task, Path(tempfile.mkdtemp(prefix="ws-flow-")) / "ws", device=args.device)
    for kernel in (args.solution / "kernels").iterdir():
        shutil.copyfile(kernel, root / "kernels" / kernel.name)
    shutil.copyfile(args.solution / "model_new.py", root / "model_new.py")
    env = dict(os.environ, CUDA_AGENT_PYTHON=sys.executable)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    steps = [
        ["bash", "utils/compile.sh"],
        ["bash", "utils/compile.sh"],
        [sys.executable, "-m", "utils.verification"],
        [sys.executable, "-m", "utils.profiling"],
        [sys.executable, "-m", "cuda_agent", "judge", args.task, str(root), "--device", args.device, "--json"],
    ]
    records = []
    for argv in steps:
        start = time.perf_counter()
        done = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=900)
        seconds = time.perf_counter() - start
        shown = " ".join(Path(a).name if a == sys.executable else a for a in argv)
        print(f"$ {shown}   ({seconds:.1f} s, exit {done.returncode})\n{done.stdout.strip()[-1500:]}", flush=True)
        if done.returncode != 0 and done.stderr.strip():
            print(done.stderr.strip()[-1500:])
        records.append(
            {
                "argv": shown,
                "exit": done.returncode,
                "seconds": seconds,
                "stdout": done.stdout[-20000:],
                "stderr": done.stderr[-4000:],
            }
        )
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        payload = {"task": args.task, "device": args.device, "solution": str(args.solution), "steps": records}
        (args.out / f"workspace_flow_{args.device}.json").write_text(json.dumps(payload, indent=1))
    return 0 if all(r["exit"] == 0 for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
