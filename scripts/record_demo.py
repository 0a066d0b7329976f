"""Record the bundled demo episode for one device (see cuda_agent/agent/demo.py).

python scripts/record_demo.py --device cpu    # writes cuda_agent/agent/demos/examples_relu_cpu.jsonl
python scripts/record_demo.py --device cuda   # on a GPU machine
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOLUTIONS = {
    "cpu": REPO / "solutions" / "workspaces" / "examples_relu_cpu",
    "cuda": REPO / "solutions" / "workspaces" / "kernelbench_L1_19",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], required=True)
    parser.add_argument("--out", type=Path, default=None, help="where to write the recording")
    args = parser.parse_args()
    from cuda_agent.agent import ReplayModel
    from cuda_agent.agent.demo import DEMO_TASK, recording_path, scripted_turns
    from cuda_agent.cli import run_agent_episode  # the same wiring as `cuda-agent demo`
    from cuda_agent.tasks import Catalog

    solution = SOLUTIONS[args.device]
    kernels = {p.name: p.read_text() for p in sorted((solution / "kernels").iterdir())}
    model = ReplayModel(scripted_turns(kernels, (solution / "model_new.py").read_text(), args.device), name="scripted")
    work = Path(tempfile.mkdtemp(prefix="record-demo-"))
    result = run_agent_episode(Catalog().resolve(DEMO_TASK), model, args.device, work, max_turns=50)
    print(result.exit_status, result.turns, result.reward, result.verdict.message)
    if result.reward is None or result.reward < 1:
        print("the scripted episode did not pass; not writing a recording", file=sys.stderr)
        return 1
    dest = args.out or recording_path(args.device)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(result.trajectory, dest)
    print(f"wrote {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
