#!/usr/bin/env bash
# Seed the judge's baseline cache ($CUDA_AGENT_CACHE) with every baseline measured before, so that a device call
# times no reference twice: the committed H200 file (BASELINES), then each device run's returned cache files
# committed with its results (bench/results/**/baseline_cache/, e.g. an H100's, whose keys the H200 file cannot
# match) and .carry/baseline_cache. Keys name the GPU, torch and CUDA: another card's entries are simply not read.
#   . bench/seed_baselines.sh LOG     (sourced by bench/judge_gpu.sh and bench/kernelbench_policy_gpu.sh)
seed_baselines() {
  local log=$1 dir
  python3 -m cuda_agent bench seed-cache "${BASELINES:-bench/results/h200-2026-12-03/kernelbench_baselines.json}" >> "$log" 2>&1
  while IFS= read -r dir; do
    echo "$dir: $(python3 -m cuda_agent bench seed-cache "$dir" 2>&1)" >> "$log"
  done < <(find bench/results .carry/baseline_cache -type d -name baseline_cache 2>/dev/null | sort)
}
