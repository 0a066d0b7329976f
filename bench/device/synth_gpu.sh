#!/usr/bin/env bash
# Task synthesis on the H200: a slice of synthesis and a sample of the Ops-6K filter audit, for the
# throughput target (6,000 kept problems in under 2 hours on the 16-core GPU machine) and the filter
# figures on a GPU. One device call (under 10 minutes); writes under $OUT.
#   N=300 WORKERS=8 SLICE_S=330 AUDIT_N=60 AUDIT_S=200 OUT=/tmp/out bash bench/device/synth_gpu.sh
# Needs, carried beside the tree: .whl/ (pydantic, rich, pyarrow, jinja2, ninja wheels), .carry/kernelbench (KernelBench
# parquet, for decontamination) and .carry/ops6k/ops6k.parquet (for the audit).
# The filter workers share the one GPU: their eager times are good enough for the 1-100 ms window, not for
# speedups. Extrapolate: kept/hour = kept / wall; 6,000 kept needs 6000 / (kept/hour) hours.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
if [ -d .whl ]; then
  . bench/site_wheels.sh && install_wheels || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
export CUDA_AGENT_DATA_DIR=$PWD/.carry CUDA_AGENT_CACHE=/tmp/ca-cache
python3 -c "import torch, pyarrow; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())" | tee "$OUT/env.txt" || exit 1
N=${N:-300} WORKERS=${WORKERS:-8}

# 1. Synthesis slice: as many kept problems as fit SLICE_S seconds (the run is resumable, so a timeout is fine).
start=$(date +%s)
timeout ${SLICE_S:-330} python3 -m cuda_agent synth --n "$N" --out "$OUT/synth_gpu.parquet" --device cuda \
  --workers "$WORKERS" --seed 0 --timeout-s 120 > "$OUT/synth_gpu.log" 2>&1
end=$(date +%s)
python3 - "$OUT" "$start" "$end" "$WORKERS" <<'PY' | tee "$OUT/synth_gpu_throughput.txt"
import json, sys
from collections import Counter
out, start, end, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rows = [json.loads(l) for l in open(f"{out}/synth_gpu.measurements.jsonl")]
kept = sum(r["kept"] for r in rows)
hours = (end - start) / 3600
print(f"{kept} kept of {len(rows)} candidates in {end - start} s with {workers} workers (incl. start-up)")
print(f"{kept / hours:.0f} kept/hour; 6,000 kept would take {6000 / max(kept / hours, 1e-9):.2f} h")
print(dict(Counter(r["reason"] or "kept" for r in rows).most_common()))
# Start-up (catalog, workers' warm-up) is paid once per run: the rate after the run's first half is the one
# that a 2-hour run sees.
timed = [r for r in rows if r.get("at_s") is not None]
if timed:
    last = max(r["at_s"] for r in timed)
    late = [r for r in timed if r["at_s"] > last / 2]
    late_kept = sum(r["kept"] for r in late)
    rate = late_kept / (last / 2 / 3600)
    print(f"second half ({last / 2:.0f}-{last:.0f} s after the filters started): {late_kept} kept of {len(late)}"
          f" -> {rate:.0f} kept/hour steady; 6,000 kept would take {6000 / max(rate, 1e-9):.2f} h plus start-up")
print("second tries (batch scaled):", Counter(r["reason"] or "kept" for r in rows if r.get("scale", 1.0) != 1.0))
# Where the workers' time went (median seconds per filtered candidate), to tell waiting for GPU turns from work.
filtered = [r["filter"] for r in rows if r.get("filter") and r["filter"].get("wall_s") is not None]
if filtered:
    from statistics import median
    stages = sorted({k for f in filtered for k in f["stage_s"]})
    print(f"worker wall median {median(f['wall_s'] for f in filtered):.2f} s, sum {sum(f['wall_s'] for f in filtered):.0f} s;"
          f" turn wait median {median(f['turn_wait_s'] for f in filtered):.2f} s, sum {sum(f['turn_wait_s'] for f in filtered):.0f} s")
    print({k: round(median(f["stage_s"][k] for f in filtered if k in f["stage_s"]), 3) for k in stages})
PY

# 2. Ops-6K filter audit on a seeded sample (every filter on every row), on the GPU.
if [ -f .carry/ops6k/ops6k.parquet ] && [ "${AUDIT_S:-200}" != 0 ]; then  # AUDIT_S=0 skips it
  timeout ${AUDIT_S:-200} python3 -m cuda_agent synth audit .carry/ops6k/ops6k.parquet --out "$OUT/ops6k_audit_gpu.jsonl" \
    --sample "${AUDIT_N:-60}" --seed 0 --device cuda --workers 4 --timeout-s 120 > "$OUT/ops6k_audit_gpu.log" 2>&1
  python3 -c "
import sys; sys.path.insert(0, '.')
from pathlib import Path
from cuda_agent.synth.audit import read_results, summarize
print(summarize(read_results(Path('$OUT/ops6k_audit_gpu.jsonl'))).model_dump_json(indent=1))" | tee "$OUT/ops6k_audit_gpu.summary.json"
fi
