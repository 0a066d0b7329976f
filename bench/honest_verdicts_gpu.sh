#!/usr/bin/env bash
# One device call on the H200 (about 4 minutes): issue 20's honest verdicts and verdict cache on CUDA.
#   1. the gpu-marked tests of tests/judge/test_pipeline.py: a CUDA out-of-memory in the judge's own
#      comparison is our JudgeInfraError (tried twice), one in the candidate's forward its runtime_error;
#   2. the verdict cache: `cuda-agent judge kernelbench/L1/19 solutions/kernelbench/L1/19.py --json`
#      three times on a cold cache (wall, verdict, env.verdict_cached, stage times of each);
#   3. the CLI on our failure (the judge's comparison out of memory): exit 3 and one line on stderr.
# Results: $OUT/honest_verdicts.tar (pytest log, the three verdicts, timings.txt, cli_ours.txt).
# Needs, carried beside the tree: .whl/ (pydantic, rich, pytest, ninja wheels) and .carry/ (the task
# parquets), as bench/judge_gpu.sh; `bash scripts/device_wheels.sh` makes both.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; R=/tmp/honest; rm -rf "$R"; mkdir -p "$R"
. bench/site_wheels.sh && install_wheels || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
export CUDA_AGENT_DATA_DIR=$PWD/.carry CUDA_AGENT_CACHE=/tmp/ca-cache TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16
nvidia-smi --query-gpu=name,driver_version --format=csv > "$R/nvidia_smi.txt"
date -u +%FT%TZ > "$R/date.txt"

timeout 240 python3 -m pytest -v -m gpu tests/judge/test_pipeline.py -p no:cacheprovider --tb=short --durations=0 \
  2>&1 | tee "$R/pytest_gpu.log" | grep -E "PASS|FAIL|ERROR|passed|failed|s call" | tail -8

for i in 1 2 3; do
  start=$(date +%s.%N)
  timeout 400 python3 -m cuda_agent judge kernelbench/L1/19 solutions/kernelbench/L1/19.py --device cuda --json \
    > "$R/l1_19_$i.json" 2> "$R/l1_19_$i.err"
  rc=$?
  wall=$(python3 -c "import time; print(f'{time.time() - $start:.2f}')")
  python3 - "$R/l1_19_$i.json" "$i" "$rc" "$wall" <<'EOF' | tee -a "$R/timings.txt"
import json, sys
path, i, rc, wall = sys.argv[1:]
try:
    v = json.load(open(path))
except ValueError:
    print(f"judgement {i}: exit {rc}, {wall} s, no verdict"); raise SystemExit
stages = ", ".join(f"{k} {s:.2f}" for k, s in v["stage_s"].items())
print(f"judgement {i}: exit {rc}, {wall} s wall, {v['verdict']} reward {v['reward']}, "
      f"verdict_cached {v['env'].get('verdict_cached')}, timings {v['timings_ms']}; stages: {stages}")
EOF
done

python3 -c "
from tests.judge.helpers import example_solution
code = open('cuda_agent/tasks/examples/problems/relu.py').read().replace(
    'return torch.relu(x)', 'torch.empty(1 << 50, dtype=torch.uint8, device=x.device)\n        return torch.relu(x)')
open('/tmp/hungry_relu.py', 'w').write(code)
open('/tmp/relu_cuda.py', 'w').write(example_solution('relu', 'cuda'))"
timeout 200 python3 -m cuda_agent judge /tmp/hungry_relu.py /tmp/relu_cuda.py --device cuda --no-time --json \
  > "$R/cli_ours.stdout" 2> "$R/cli_ours.stderr"
echo "exit $? (3: ours); stdout $(wc -c < "$R/cli_ours.stdout") bytes; stderr lines $(wc -l < "$R/cli_ours.stderr")" \
  | tee "$R/cli_ours.txt"
cut -c1-400 "$R/cli_ours.stderr"

tar -cf "$OUT/honest_verdicts.tar" -C "$R" .
