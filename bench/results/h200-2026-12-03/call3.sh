#!/usr/bin/env bash
# The third device call of 2026-12-03 (nvidia-h200, carry [".whl", ".carry"] made by `bash scripts/device_wheels.sh rl`).
# Steps in priority order, each under its own time limit; $OUT/call3.tgz is rewritten after each step.
set -uo pipefail
R=$OUT; export OUT=/tmp/o3; mkdir -p $OUT
pack() { tar czf "$R/call3.tgz" -C "$OUT" . ; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH CUDA_AGENT_DATA_DIR=$PWD/.carry \
  CUDA_AGENT_CACHE=/tmp/ca-cache TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16
B=$OUT/kernelbench_baselines.json; cp bench/results/h200-2026-12-03/kernelbench_baselines.json $B
# 1. the rest of level 1's baselines, 8 processes preparing at once, one timing at a time
timeout ${BASE_S:-270} python3 -m cuda_agent bench baselines --workers 8 --suite kernelbench --levels 1 --device cuda \
  --out $B > $OUT/baselines.log 2>&1; tail -3 $OUT/baselines.log; pack
# 2. the sandbox pool: judgements per hour (cold builds in parallel with timing), timing isolation
timeout ${POOL_S:-250} python3 bench/sandbox_gpu.py --repeats 1 --samples 3 --busy-builds 12 --baselines $B \
  --out $OUT/sandbox_gpu.json > $OUT/sandbox_gpu.log 2>&1; grep -E "round|idle|within|ratio" $OUT/sandbox_gpu.log | tail -5; pack
# 3. one PPO step of actor and critic on verl's engine, fed by episodes judged by the CUDA sandbox
timeout ${RL_S:-200} python3 bench/rl_step_gpu.py --device cuda --out $OUT/rl_step --work /tmp/rl_step > $OUT/rl_step.out 2>&1
tail -25 $OUT/rl_step.out; pack
