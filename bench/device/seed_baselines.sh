#!/usr/bin/env bash
# The judge's baseline cache ($CUDA_AGENT_CACHE) across device calls, so that no call times a reference twice.
#   . bench/device/seed_baselines.sh      (sourced by bench/device/judge_gpu.sh and bench/device/kernelbench_policy_gpu.sh)
# seed_baselines LOG: seeds the cache with the committed H200 file (BASELINES), then each device run's returned
#   cache files committed with its results (bench/results/**/baseline_cache/, e.g. an H100's, whose keys the H200
#   file cannot match) and .carry/baseline_cache. Keys name the GPU, torch and CUDA: another card's are not read.
# returned_baselines SINCE DEST: copies the cache's baselines newer than the file SINCE (what this call measured)
#   into DEST, to come back with the results and be committed there.
seed_baselines() {
  local dirs=()
  mapfile -t dirs < <(find bench/results .carry/baseline_cache -type d -name baseline_cache 2>/dev/null | sort)
  local mark
  mark=$(mktemp)
  python3 -m cuda_agent bench seed-cache "${BASELINES:-bench/results/h200-2026-12-03/kernelbench_baselines.json}" \
    "${dirs[@]}" >> "$1" 2>&1
  # What was seeded is committed already: aged, so that returned_baselines (files newer than a mark taken before
  # the seeding, as bench/device/judge_gpu.sh's) sends back only what this call measured, not all 250.
  find "${CUDA_AGENT_CACHE:-$HOME/.cache/cuda-agent}/baselines" -name '*.json' -newer "$mark" -exec touch -d @0 {} + \
    2>/dev/null
  rm -f "$mark"
}
returned_baselines() {
  mkdir -p "$2" && find "$CUDA_AGENT_CACHE/baselines" -name '*.json' -newer "$1" -exec cp {} "$2/" \; 2>/dev/null
}
