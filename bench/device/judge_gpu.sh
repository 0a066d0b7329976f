#!/usr/bin/env bash
# The judge's latency and throughput on one GPU (bench/judge_latency.py's parts, and the edit loop and build
# benchmarks beside them), in one device call of at most ~9 minutes; results in $OUT/judge_gpu.tar.
#   OUT=/tmp/out bash bench/device/judge_gpu.sh
#   PARTS="A B E" OUT=/tmp/out bash bench/device/judge_gpu.sh     # only these parts (~400 s: the serve's figures)
# Carry [".whl", ".carry"] (from `bash scripts/device_wheels.sh`: the wheels the image lacks, and the KernelBench
# parquet for kernelbench/L1/*). Parts and their time on the H200:
#   A    ~100 s  a cold `cuda-agent judge kernelbench/L1/19` (build, baselines) and its lone cached verdict
#   D     ~80 s  then, alone: a candidate whose C++ spins with the GIL held (its own cold build, then `timeout` at
#                its step limit). Not beside A: each one's times would hold the other's build and GPU turns
#   B    ~200 s  3 rounds of a cached CLI judgement of L1/19, in the CLI's process and through `cuda-agent judge
#                --sandbox URL` against a `cuda-agent serve --spares 1` started for it: wall (<= 7 s) and GPU-slot
#                seconds (<= 5 s) of both (the serve's start and a first served judgement are not counted)
#   C     ~45 s  2, then 4 concurrent CLI judgements of L1/19: each verdict equals the lone one
#   E    ~160 s  workspace iteration on examples/scale_add: ours, ours through a `cuda-agent serve --spares 2`
#                (CUDA_AGENT_SANDBOX_URL; verification and profiling back to back want two ready), the released
#                scripts' behaviour
#   F    ~120 s  LocalPool steady state on distinct L1 candidates with cold builds: collects for what is left of
#                TOTAL_S (520 s; at most 260 s), then cancels the rest; baselines seeded from BASELINES (the
#                committed H200 file) first
#   G    ~150 s  cold single-file builds of L1/26 and L1/47 (lean header, precompiled main.cpp; the machine's
#                prepare timed apart) against torch's plain load_inline: bench/single_file_build.py (<= 20 s)
#   (G runs only when named: PARTS="A D G B")
# GPU memory is sampled every 0.5 s throughout (gpu_memory.csv): two judges at L1/19 sizes can each hold ~69 GB.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/judge_gpu"
R=$OUT/judge_gpu
if [ -d .whl ]; then
  . bench/site_wheels.sh && install_wheels || exit 1
fi
chmod -R a+rX /tmp/site 2>/dev/null  # the candidate's processes run as nobody and import from here too
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
export TORCH_CUDA_ARCH_LIST=9.0 CUDA_AGENT_CACHE=${CUDA_AGENT_CACHE:-/tmp/ca-cache} CUDA_AGENT_DATA_DIR=$PWD/.carry
python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())" | tee "$R/env.txt" || exit 1
nvidia-smi > "$R/nvidia_smi.txt" 2>&1
git log --oneline -1 >> "$R/env.txt" 2>/dev/null
nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv -lms 500 > "$R/gpu_memory.csv" 2>/dev/null &
SMI=$!
t0=$(date +%s)
TOTAL_S=${TOTAL_S:-520}  # with the set-up above, under the device's 600 s per command; each part gets what is left
PARTS=" ${PARTS:-A D B C E F} "  # each part runs only when named here
want() { [[ "$PARTS" == *" $1 "* ]]; }
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$R/timeline.txt"; }
left() { local l=$(( TOTAL_S - ($(date +%s) - t0) )); echo $(( l < $1 ? (l > 5 ? l : 5) : $1 )); }
pack() { tail -n 3 "$R"/part_*.log > "$R/summary.txt" 2>&1; tar -C "$OUT" -cf "$OUT/judge_gpu.tar" judge_gpu; }

stamp "A start (parts:$PARTS)"
if want A; then
  timeout "$(left 200)" python3 bench/judge_latency.py --parts A --device cuda --out "$R" > "$R/part_A.log" 2>&1
  stamp "A done"; pack
fi
if want D; then
  timeout "$(left 150)" python3 bench/judge_latency.py --parts D --device cuda --out "$R" > "$R/part_D.log" 2>&1
  stamp "D done"; pack
fi
if want B; then  # judge_gpu.py stops its serve on the SIGTERM of `timeout`
  timeout "$(left 260)" python3 bench/judge_latency.py --parts B --sandbox serve --spares 1 --device cuda --out "$R" \
    --repeat ${B_REPEAT:-3} > "$R/part_B.log" 2>&1
  stamp "B done"; pack
fi
if want C; then  # C reads the lone verdict from part A's file.
  timeout "$(left 120)" python3 bench/judge_latency.py --parts C --device cuda --out "$R" > "$R/part_C.log" 2>&1
  stamp "C done"; pack
fi
if want E; then
  timeout "$(left 240)" python3 bench/workspace_iteration.py --device cuda --sandbox serve --spares 2 --iterations 1 \
    --out "$R" > "$R/part_E.log" 2>&1
  stamp "E done"; pack
fi
if want G; then
  timeout "$(left 240)" python3 bench/single_file_build.py --device cuda --max-s 150 \
    --solutions solutions/kernelbench/L1/26.py solutions/kernelbench/L1/47.py --out "$R" > "$R/part_G.log" 2>&1
  stamp "G done"; pack
fi
POOL_S=${POOL_S:-$(( $(left 300) - 40 ))}  # 40 s for closing the pool (cancelling what runs) and packing
if want F && [ "$POOL_S" -gt 30 ]; then
  # The committed H200 baselines (keys name the GPU, torch and CUDA: another card just misses them), so that F
  # measures judgements rather than seven first torch.compile timings of ~27 s of GPU each.
  # Every baseline_cache/ committed with earlier device runs' results as well (an H100's: bench/device/seed_baselines.sh).
  . bench/device/seed_baselines.sh && seed_baselines "$R/seed_cache.log"
  timeout $(( POOL_S + 30 )) python3 bench/judge_latency.py --parts F --device cuda --out "$R" --n "${N:-100}" \
    --pool-s "$POOL_S" --build-workers "${BUILD_WORKERS:-14}" > "$R/part_F.log" 2>&1
  stamp "F done (pool_s $POOL_S)"
fi
kill $SMI 2>/dev/null
# The baselines this call measured (newer than the call's start: part A's cold judgement, F's tasks on a card
# the committed files do not cover): commit them with the results and later calls seed from them.
. bench/device/seed_baselines.sh && returned_baselines "$R/env.txt" "$R/baseline_cache"
pack
cat "$R/summary.txt"
rm -rf "$R"  # the tar holds it all (it is packed after every part, so a call cut short keeps what was done)
