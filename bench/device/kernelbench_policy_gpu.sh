#!/usr/bin/env bash
# On one GPU: the mixed KernelBench solutions (torch's cuDNN convolution or cuBLAS GEMM plus the
# solution's own fused kernel; solutions/kernelbench_mixed/cuda/L2/*.py) judged by `cuda-agent bench` under the
# kernelbench policy, with custom_kernel_time_fraction per task in results.json and report.md. One device call
# of up to ~9 minutes (BENCH_S=520 for the bench; device tool timeout 600); everything comes back as
# $OUT/kernelbench_policy.tar.gz. With BENCH_S=205 an H100 finished 5 of the 22 tasks (cold builds of 22 solutions
# on 16 cores: bench/results/h100-2026-12-05/kernelbench_policy/).
#
#   bash scripts/device_wheels.sh            # here, once: .whl/ (wheels the image lacks) and .carry/ (task parquets)
#   then one device call carrying [".whl", ".carry"]:  bash bench/device/kernelbench_policy_gpu.sh
#   afterwards, here: cuda-agent bench report DIR  (the GPU image has no matplotlib for report.html)
#   a run cut by BENCH_S, carried on in a later call: here, copy its bench_kb/ to .carry/bench_kb, then
#   RESUME=.carry/bench_kb bash bench/device/kernelbench_policy_gpu.sh. Commit the baseline_cache/ it returns with its
#   results: every later call seeds the cache from each committed baseline_cache/ (bench/device/seed_baselines.sh).
#
# Steps: (1) the static policy of every file under both policies (instant: kernelbench must accept, cuda-agent must
# reject with torch_compute_in_forward); (2) the bench, baselines seeded from the committed H200 file and every
# committed baseline_cache/ (bench/device/seed_baselines.sh), with fewer trials and shorter timed phases than the defaults
# so that 22 tasks fit (BENCH_S caps it; results.jsonl keeps every finished task if the cap hits); (3)
# fractions.txt: verdict and custom_kernel_time_fraction per task.
set -uo pipefail
OUT=${OUT:-/tmp/out}
W="$OUT/kernelbench_policy"
mkdir -p "$W"
. bench/site_wheels.sh && install_wheels || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
export CUDA_AGENT_DATA_DIR=$PWD/.carry CUDA_AGENT_CACHE=/tmp/ca-cache TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16
SOLUTIONS=solutions/kernelbench_mixed/cuda
BASELINES=${BASELINES:-bench/results/h200-2026-12-03/kernelbench_baselines.json}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$W/nvidia_smi.txt"
{ date -u; git log -1 --format='%H %s' 2>/dev/null; echo "bash bench/device/kernelbench_policy_gpu.sh"; } > "$W/command.txt"

python3 - "$SOLUTIONS" > "$W/policy_check.txt" 2>&1 <<'PY'
import sys
from pathlib import Path
from cuda_agent.judge.policy import check_policy
from cuda_agent.judge.solution import SolutionSource
bad = 0
for path in sorted(Path(sys.argv[1]).glob("L2/*.py"), key=lambda p: int(p.stem)):
    source = SolutionSource(python=path.read_text())
    kb = [v.check for v in check_policy(source, "cuda", policy="kernelbench")]
    ca = sorted({v.check for v in check_policy(source, "cuda", policy="cuda-agent")})
    bad += bool(kb) or "torch_compute_in_forward" not in ca
    print(f"{path}: kernelbench {kb or 'accepted'}; cuda-agent rejected by {ca}")
print(f"{bad} file(s) out of line")
PY
tail -1 "$W/policy_check.txt"

# A run carried on across calls (a card whose baselines are not in the committed file times each task's eager and
# torch.compile first, ~27 s of GPU each on the H100): RESUME= a bench_kb folder an earlier call returned (its
# config.json and results.jsonl, e.g. carried as .carry/bench_kb) is carried on with --resume; the baselines that
# call measured come back in baseline_cache/ and, committed under bench/results/, are used again here.
RESUME_ARGS=()
if [ -n "${RESUME:-}" ]; then
  mkdir -p "$W/bench_kb" && cp "$RESUME/config.json" "$RESUME/results.jsonl" "$W/bench_kb/" || exit 1
  RESUME_ARGS=(--resume)
  echo "carrying on $RESUME: $(wc -l < "$RESUME/results.jsonl") task(s) done"
fi
. bench/device/seed_baselines.sh && seed_baselines "$W/seed_cache.log"  # the H200 file and every baseline_cache/ before
touch "$W/.seeded"  # what the judge's cache holds newer than this was measured by this call
TASKS=$(ls $SOLUTIONS/L2/*.py | sed -E 's#.*/L2/([0-9]+)\.py#kernelbench/L2/\1#' | sort -t/ -k3 -n | head -n "${MAX_TASKS:-99}" | paste -sd,)
timeout "${BENCH_S:-520}" python3 -m cuda_agent bench --suite "$TASKS" --solutions "$SOLUTIONS" --device cuda \
  --policy kernelbench --workers 16 --no-speed-of-light --out "$W/bench_kb" \
  --judge trials=2 --judge robustness_trials=false --judge target_phase_s=0.25 --judge min_reps=5 "${RESUME_ARGS[@]}" \
  2>&1 | tee "$W/bench.log" | tail -8
returned_baselines "$W/.seeded" "$W/baseline_cache"

python3 - "$W/bench_kb/results.jsonl" > "$W/fractions.txt" 2>&1 <<'PY'
import json, sys
rows = {}  # by task: a later line (a resumed run's) wins, as in the bench's own reading
for line in open(sys.argv[1]):
    row = json.loads(line)
    rows[row["ref"]] = row
rows = list(rows.values())
for row in sorted(rows, key=lambda r: int(r["ref"].rsplit("/", 1)[1])):
    v = row.get("verdict") or {}
    frac = v.get("custom_kernel_time_fraction")
    t = v.get("timings_ms") or {}
    print(f"{row['ref']:18s} {v.get('verdict', row['status']):14s} own {'n/a' if frac is None else f'{frac:6.1%}'}"
          f"  solution {t.get('solution')} ms  eager {t.get('eager')} ms  compile {t.get('compile')} ms"
          f"  {'' if v.get('verdict') == 'pass' else (v.get('message') or row.get('error') or '')[:160]}")
print(f"{len(rows)} tasks judged")
PY
cat "$W/fractions.txt"
tar -czf "$OUT/kernelbench_policy.tar.gz" -C "$OUT" kernelbench_policy && rm -rf "$W"
