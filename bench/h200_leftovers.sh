#!/usr/bin/env bash
# What the 2026-12-03 device time did not reach, as one H200 call (nvidia-h200, carry [".whl", ".carry"] made by
# `bash scripts/device_wheels.sh rl`, timeout_s 600). The limits add up to 560 s; $OUT/leftovers.tgz is rewritten
# after each step, so a step cut by its limit keeps what the earlier ones measured.
#   1. (the hand-wired PPO step is gone: verl's own trainer runs in bench/train_gpu.sh, issue 21)
#   2. the sandbox pool's timing isolation: one kernel timed with the build workers idle, then busy compiling (issue 5)
#   3. the baselines not yet measured: kernelbench/L1/100, then level 2 (issue 7), resuming the committed file
#   4. the four filters on Ops-6K rows (issue 8): AUDIT_N rows of a seeded sample, or with AUDIT_ALL=FILE every row,
#      resuming the committed JSONL FILE (the copy in $OUT/ comes back grown: copy it over FILE and commit)
#   0. with CONFINE_S set: the judge's candidate processes as nobody (tests/judge/test_confine.py, then one CUDA
#      judgement through the pool, its verdict env in confine_gpu.json) (issue 5)
# Knobs: CONFINE_S, POOL_S, BASE_S (0 skips a step), SAMPLES, UNPINNED=1 (isolation also without reserved cores),
# LEVELS, AUDIT_S, AUDIT_N, AUDIT_ALL, AUDIT_W (step 4 runs when AUDIT_S is set; 12 workers by default).
set -uo pipefail
R=$OUT; export OUT=/tmp/leftovers; mkdir -p $OUT
pack() { tar czf "$R/leftovers.tgz" -C "$OUT" . ; }
. bench/site_wheels.sh && install_wheels || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH CUDA_AGENT_DATA_DIR=$PWD/.carry \
  CUDA_AGENT_CACHE=/tmp/ca-cache TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16
B=$OUT/kernelbench_baselines.json; cp bench/results/h200-2026-12-03/kernelbench_baselines.json $B
if [ "${CONFINE_S:-0}" != 0 ]; then
  timeout $CONFINE_S python3 -m pytest -q -rs -p no:cacheprovider tests/judge/test_confine.py > $OUT/confine_tests.log 2>&1
  tail -4 $OUT/confine_tests.log
  timeout $CONFINE_S python3 - > $OUT/confine_gpu.json 2>$OUT/confine_gpu.log <<'EOF'
import json
from cuda_agent.sandbox.jobs import make_judge_job
from cuda_agent.sandbox.local import LocalPool
with LocalPool(build_workers=2) as pool:
    r = pool.run(make_judge_job("kernelbench/L1/19", open("solutions/kernelbench/L1/19.py").read()))
v = r.verdict
print(json.dumps({"status": r.status, "error": r.error, "verdict": v and v.verdict, "solution_ms": v and v.timings_ms.solution,
    "candidate_user": v and v.env.get("candidate_user"), "candidate_isolation": v and v.env.get("candidate_isolation"),
    "hardening": r.hardening}, indent=1))
EOF
  cat $OUT/confine_gpu.json; pack
fi
if [ "${POOL_S:-150}" != 0 ]; then  # POOL_S=0 skips the isolation step
  timeout ${POOL_S:-150} python3 bench/sandbox_gpu.py --repeats 0 --samples ${SAMPLES:-3} --baselines $B \
    ${UNPINNED:+--compare-unpinned} --out $OUT/sandbox_isolation.json > $OUT/sandbox_isolation.log 2>&1
  grep -v '^ ' $OUT/sandbox_isolation.log | tail -8; pack
fi
if [ "${BASE_S:-170}" != 0 ]; then  # BASE_S=0 skips the baselines
  timeout ${BASE_S:-170} python3 -m cuda_agent bench baselines --workers 8 --suite kernelbench --levels ${LEVELS:-1,2} \
    --device cuda --out $B > $OUT/baselines.log 2>&1; tail -3 $OUT/baselines.log; pack
fi
if [ "${AUDIT_S:-0}" != 0 ]; then
  if [ -n "${AUDIT_ALL:-}" ]; then  # AUDIT_ALL=FILE: the committed JSONL to resume (it need not exist yet)
    A=$OUT/$(basename $AUDIT_ALL); PICK=""; touch $AUDIT_ALL
    # A warm machine still holds the copy an earlier call grew: keep whichever has more rows.
    [ -f $A ] && [ "$(wc -l < $A)" -ge "$(wc -l < $AUDIT_ALL)" ] || cp $AUDIT_ALL $A
  else
    A=$OUT/ops6k_audit_gpu2.jsonl; PICK="--sample ${AUDIT_N:-300} --seed 1"
  fi
  timeout ${AUDIT_S} python3 -m cuda_agent synth audit .carry/ops6k/ops6k.parquet --out $A $PICK \
    --device cuda --workers ${AUDIT_W:-12} --timeout-s 90 > ${A%.jsonl}.out 2>&1 &
  # Pack every 10 s: a call cut by the device limit still brings its rows back (the audit skips a cut line).
  while kill -0 $! 2>/dev/null; do sleep 10; pack; done
  wc -l $A; pack
fi
