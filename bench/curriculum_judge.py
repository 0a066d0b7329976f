"""Judge the curriculum's answers the way PPO's reward does, before PPO's first step (bench/learning_gpu.sh).

    python bench/curriculum_judge.py CURRICULUM_DIR OUT_DIR --device cuda --sandbox-url URL --work-dir DIR

Each variant's answer text (cuda_agent/rl/curriculum.py) goes through `single_turn.compute_score`, the reward
function of recipes/curriculum_ppo.yaml, with the recipe's settings (device, sandbox_url, work_dir) on the task row
of CURRICULUM_DIR/rl.parquet. So the printed rewards are what PPO's reward function gives an exact copy of each
answer, and the serve's verdict cache holds them when PPO asks: on the H100 (2026-12-05) PPO's first step judged
its four distinct answers cold, ~22 s each, while `cuda-agent judge` of the same folders ran beside it with other
settings. Writes OUT_DIR/judge_<variant>.json (compute_score's fields) and prints one line per variant.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.served import wait_healthy  # noqa: E402
from cuda_agent.rl.curriculum import variants
from cuda_agent.rl.single_turn import compute_score

SERVE_START_S = 60.0
"""How long the serve, started just before this script, may take to answer."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("curriculum", type=Path, help="the folder `cuda-agent train curriculum --out` wrote")
    parser.add_argument("out", type=Path, help="where judge_<variant>.json go")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--sandbox-url", required=True, help="the `cuda-agent serve` PPO's reward uses")
    parser.add_argument("--work-dir", type=Path, required=True, help="under the serve's workspace root")
    args = parser.parse_args(argv)
    rl = args.curriculum / "rl.parquet"
    if not rl.is_file():
        parser.error(f"no {rl}: give the folder `cuda-agent train curriculum --out` wrote")
    wait_healthy(args.sandbox_url, start_s=SERVE_START_S)
    row = pq.read_table(rl).to_pylist()[0]
    settings = {"device": args.device, "sandbox_url": args.sandbox_url, "work_dir": str(args.work_dir)}

    def judge(answer: str) -> dict:
        return compute_score(
            row["data_source"], answer, row["reward_model"]["ground_truth"], row["extra_info"], **settings
        )

    chosen = variants(args.device)
    args.out.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(len(chosen)) as pool:  # side by side, as PPO's first step asks
        results = list(pool.map(judge, [v.answer(args.device) for v in chosen]))
    for variant, result in zip(chosen, results, strict=True):
        (args.out / f"judge_{variant.name}.json").write_text(json.dumps(result, indent=2) + "\n")
        speedup = result.get("speedup_vs_compile")
        print(
            f"== judged {variant.name} (PPO's reward): {result['verdict']} reward {result['score']}, "
            f"vs torch.compile {f'{speedup:.3f}x' if speedup else '-'}, {result['judge_s']:.1f} s"
            + (f": {result['reason']}" if result.get("reason") else "")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
