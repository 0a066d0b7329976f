#!/usr/bin/env bash
# The sandbox pools on several GPUs, in one device call (under 10 minutes) on a 2-8 GPU machine: bench/multi_gpu.py, the local and
# the Ray sandbox pool across all GPUs (throughput scaling, every job answered once, cross-GPU timing agreement).
#
# Here, first: `bash scripts/device_wheels.sh ray` fills .whl/ (pydantic & co., Ray without its Java jar, and
# jsonschema, which ray.init imports; the image has neither) and .carry/ (the task parquets). Then one call:
#   run(kind="nvidia-h200-x2" (or -x4, -x8), carry=[".whl", ".carry"], timeout_s=600,
#       command="bash bench/device/multi_gpu.sh")
# Everything lands in $OUT, 5 files: multi_gpu.json (rewritten after every step, so the time limit loses only
# the step in progress), multi_gpu.log, nvidia_smi.txt, env.txt, extras.tar.gz (Ray's logs).
# Time: ~35 s install and probes, BUDGET_S for the benchmark (its last step may overrun by ~30 s: the
# hard timeout is BUDGET_S + 50), a few seconds to pack. Copy $OUT to bench/results/<kind>-DATE/ and commit.
#
# CPU dry run of this script (no install, no nvidia-smi; CPU timing slots and the CPU examples):
#   CPU_SLOTS=2 BUDGET_S=120 ARGS="--pools local --ks 2 --samples 2" OUT=/tmp/mg bash bench/device/multi_gpu.sh
set -uo pipefail
# The GPU machines' rule (NVLink multicast off), exported before anything starts; multi_gpu.py sets it too.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
BUDGET_S=${BUDGET_S:-470}
export PYTHONUNBUFFERED=1 CUDA_AGENT_DATA_DIR=$PWD/.carry
if [ -z "${CPU_SLOTS:-}" ]; then
  . bench/site_wheels.sh && install_wheels || exit 1
  export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH CUDA_AGENT_CACHE=/tmp/ca-cache TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=4
  { nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw \
      --format=csv; nvidia-smi topo -m; } > "$OUT/nvidia_smi.txt" 2>&1
  BASELINES=${BASELINES:-bench/results/h200-2026-12-03/kernelbench_baselines.json}
  MODE=(--baselines "$BASELINES")
else
  export PYTHONPATH=$PWD
  MODE=(--cpu-slots "$CPU_SLOTS" --judge-config '{"trials": 2, "robustness_trials": false}')
fi
python3 - > "$OUT/env.txt" 2>&1 <<'PY'
import os, torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count(),
      [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])
print({k: os.environ.get(k) for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")})
try:
    import jsonschema, ray
    print("ray", ray.__version__)
except ImportError as exc:
    print("no ray (the Ray runs will fail; run `bash scripts/device_wheels.sh ray` before the call):", exc)
PY
cat "$OUT/env.txt"
# shellcheck disable=SC2086  # ARGS is a list of extra options
timeout -k 10 $((BUDGET_S + 50)) python3 bench/multi_gpu.py "${MODE[@]}" --budget-s "$BUDGET_S" \
  --out "$OUT/multi_gpu.json" ${ARGS:-} > "$OUT/multi_gpu.log" 2>&1
status=$?
grep -v '^  \[' "$OUT/multi_gpu.log" | tail -40  # the per-job lines stay in the log
[ -d /tmp/ray/session_latest/logs ] && tar -czf "$OUT/extras.tar.gz" -C /tmp/ray/session_latest \
  $(cd /tmp/ray/session_latest && find logs -type f -size -2M | head -400) 2>/dev/null
ls -la "$OUT"
exit $status
