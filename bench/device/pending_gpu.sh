#!/usr/bin/env bash
# The GPU checks the open issues wait for, in one device call of at most ~9.5 minutes, each part time-boxed so that a
# slow one cannot eat the rest; everything comes back as $OUT/pending_gpu.tar (a log per part and summary.txt: each
# part's command, exit status, seconds and pytest's last line).
#   here, once:  bash scripts/device_wheels.sh    (.whl/: the wheels the image lacks; .carry/: the task parquets)
#   one call carrying [".whl", ".carry"]:  bash bench/device/pending_gpu.sh
#   PARTS="outputs judge" bash bench/device/pending_gpu.sh    (only these parts, in this order)
# Parts (issue; budget in seconds):
#   outputs   (36; 150) the grader reads a CUDA candidate's outputs itself (IPC handle, its own stream), the exchange
#             of CUDA inputs, the copy and gauge threats on CUDA
#   judge     (36; 170) the judge's GPU tests and the baselines timed through a shim of ours on CUDA
#   precision (38;  90) strict precision that passes a plain-order fp32 reduction; kernel times beside whole calls
#   triton    (40; 150) the Triton judge, its threats, the examples and the workspace's commands on the GPU
# Parts that need verl (issue 39's tests/rl/test_node_recipe.py) are not here: .whl from `device_wheels.sh rl` and
# .carry together pass the 64 MiB a call carries.
set -uo pipefail
OUT=${OUT:-/tmp/out}
R=$OUT/pending_gpu
mkdir -p "$R"
. bench/site_wheels.sh && install_wheels || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
export CUDA_AGENT_DATA_DIR=$PWD/.carry CUDA_AGENT_CACHE=/tmp/ca-cache TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16
PARTS=${PARTS:-outputs judge precision triton}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$R/nvidia_smi.txt"
{ date -u; git log -1 --format='%H %s' 2>/dev/null; echo "PARTS=\"$PARTS\" bash bench/device/pending_gpu.sh"; } \
  > "$R/command.txt"
pack() { tar -cf "$OUT/pending_gpu.tar" -C "$OUT" pending_gpu; }
trap pack EXIT

part() {  # part NAME SECONDS pytest-arguments...: one time-boxed pytest run, its log and a summary line
  local name=$1 limit=$2 start rc
  shift 2
  start=$(date +%s)
  timeout "$limit" python3 -m pytest -v -m gpu -p no:cacheprovider --tb=short "$@" > "$R/$name.log" 2>&1
  rc=$?
  printf '%-9s rc=%-3s %4ss  %s\n    pytest %s\n' "$name" "$rc" "$(($(date +%s) - start))" \
    "$(grep -E '(passed|failed|error|skipped|deselected)' "$R/$name.log" | tail -1)" "$*" >> "$R/summary.txt"
  pack
}

for name in $PARTS; do
  case $name in
    outputs) part outputs 150 tests/judge/child/test_outputs.py tests/judge/child/test_exchange.py \
      tests/judge/threats/test_shim_copy_and_gauge.py ;;
    judge) part judge 170 tests/judge/test_gpu.py tests/judge/child/test_baseline.py ;;
    precision) part precision 90 -s tests/judge/test_precision_gpu.py tests/judge/test_kernel_time_gpu.py ;;
    triton) part triton 150 -k triton tests/judge/test_triton.py tests/judge/threats/test_triton_hacks.py \
      tests/tasks/test_examples.py tests/workspace/test_commands.py ;;
    *) echo "unknown part $name; have: outputs judge precision triton" >&2; exit 2 ;;
  esac
done
cat "$R/summary.txt"
