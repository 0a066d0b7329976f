#!/usr/bin/env bash
# "Learning is visible" on one H200 (issue 21): a tiny model learns the curriculum (README "Training on verl",
# cuda_agent/rl/curriculum.py) with verl's own trainers and rewards from the real CUDA sandbox.
#
#   1. a tiny random Qwen2 actor and critic (bench/tiny_model.py; nothing downloaded);
#   2. the curriculum: three single-turn answers for scale_add: fast (reward 2-3), slow (1), wrong (-1), on CUDA
#      judged at 128M elements a tensor (curriculum_kernels/scale_add/cuda/problem.py); each is judged once in the
#      background through PPO's own reward function and `cuda-agent serve` (bench/curriculum_judge.py) while SFT
#      trains or PPO starts, which shows their rewards and fills the serve's verdict cache before PPO's first step;
#   3. SFT with verl's SFT trainer on all three in equal shares (`cuda-agent train rft --config
#      recipes/curriculum_sft.yaml`), time-boxed (SFT_BUDGET_S; checkpoints every SFT_SAVE steps, so a cut SFT still
#      hands on its latest complete one): the model then answers with one of them at random;
#   4. PPO with verl's trainer (`cuda-agent train single-turn --config recipes/curriculum_ppo.yaml`), per seed, STEPS
#      steps or until BUDGET_S, judged by a `cuda-agent serve` on the same GPU; verl's file logger writes every step;
#   5. per seed `cuda-agent train report` (steps.jsonl, report.html with the reward curve), and the learning check:
#      the mean reward of the last 5 steps beats the first 5 by more than 3 standard errors, over the seeds
#      (`python -m cuda_agent.rl.report --learning ...`).
# Results: $OUT/learning_gpu.tar (logs, metrics, verdicts, reports), packed after every stage, every 30 s while SFT
# or PPO runs and on every exit, so a run cut by the device's limit still returns what it did; and after SFT
# $OUT/learning_models.tar (sft_model/, critic/: ~9 MB), which FROM= takes in a later call to skip steps 1 and 3.
#
# Knobs (env): STEPS=30 SEEDS="0 1" PARALLEL (1 on cuda: the seeds' PPO runs side by side; 0 on cpu: one after
# the other) SFT_STEPS (200 cuda, 300 cpu) SFT_BATCH=24 SFT_SAVE=50
# SFT_BUDGET_S (150 cuda, 1200 cpu) HIDDEN=128 LAYERS=2 N=16 (answers per step) BUDGET_S=540 (the whole script; PPO
# is stopped there) FROM= (a folder holding sft_model/ and critic/: no tiny model, no SFT) STEPS=0 (no PPO).
# RAY_STOP=0: other Ray clusters run beside this script's (bench/chain_gpu.sh in the same call, below): no
# `ray stop --force` on the GPU, which would stop theirs too; ours stop with their process groups.
# DEVICE=cuda (default) or cpu: on the CPU, verl runs on our CPU platform (trainer.device=cpu, cuda_agent.rl.verl_cpu;
# the SFT step through cuda_agent.rl.sft_cpu, verl's SFT trainer with a gloo group), the curriculum is the CPU one
# (one-file C++ answers of ~310 tokens, a 2-line prompt: cuda_agent/rl/curriculum.py) and the judge times on the CPU.
# MAX_RESPONSE=448 (CPU only: the rollout's length limit). CPU run of 2026-12-05 (bench/results/cpu-2026-12-05-learning/,
# 27 minutes on 2 shared cores): SFT 300 steps in ~8 min, every probe sample an exact copy; PPO ~12 s a step; the
# learning check over 2 seeds: first 5 steps 1.45, last 5 2.8, 5.5 standard errors, visible:
#   DEVICE=cpu STEPS=30 SEEDS="0 1" SFT_STEPS=300 SFT_BATCH=6 N=8 BUDGET_S=3000 SFT_BUDGET_S=1500 bash bench/learning_gpu.sh
#
# H100 run of 2026-12-05 (bench/results/h100-2026-12-05/learning/, FROM=.carry/learn SEEDS=0): PPO start-up ~160 s,
# then 22-25 s a step (generation 8-10 s, old_log_prob 3.5 s, update_actor 10.5 s against update_critic 0.4 s):
# 16 of 30 steps in BUDGET_S=540. Since then remove-padding is off on the GPU too (the likely cost: see PPO_KNOBS
# below) and verl's torch.compile (actor, ref, critic), as in bench/train_gpu.sh; for 30 steps give BUDGET_S=570.
# Second H100 run (bench/results/h100-2026-12-05-b/learning/, same command with BUDGET_S=570): 19 steps, 18-23 s
# each (update_actor 8.5 s, old log-probs 2.9 s; the critic's 0.3 and 0.1 s), learning check 4.2 standard errors
# over one seed. Since then verl's per-token log-prob loop runs in blocks (cuda_agent/rl/verl_logprobs.py) and the
# recipe takes PPO's old log-probs from the rollout (verl's bypass mode: no 2.9 s recomputation); expected ~12-13 s
# a step, 30 steps in BUDGET_S=580 (CPU wiring run of both, 2 steps: bench/results/cpu-2026-12-05-logprobs/).
# Third H100 run (bench/results/h100-2026-12-05-c/learning/, BUDGET_S=580 SEEDS=0): 30 steps in 420 s, 7.4-10.7 s a
# step (update_actor 0.22 s; generation 6.8 s, of which half was the first request's lone batch, since gathered:
# HFRolloutServer._gather), 3.2 standard errors over one seed. With PARALLEL=1 (since) both seeds run in one call:
#   FROM=.carry/learn BUDGET_S=570 bash bench/learning_gpu.sh   (carry [".whl", ".carry/learn"], timeout 600)
# and with the four-stage chain's first part beside it (tiny models: the GPU is idle most of a step; the
# curriculum's verdicts are cached before PPO's first step), carry [".whl", ".carry/learn"]:
#   export RAY_STOP=0 OUT=$OUT; R=/tmp/learning_gpu/results
#   AFTER="$R/judge_fast.json $R/judge_slow.json $R/judge_wrong.json" BUDGET_S=555 bash bench/chain_gpu.sh \
#     > $OUT/chain.log 2>&1 & WORK=/tmp/learning_gpu FROM=.carry/learn BUDGET_S=570 bash bench/learning_gpu.sh \
#     > $OUT/console.log 2>&1; wait
# H200 time (one GPU, 16 cores; 2026-12-05: 3 cold judgements 117 s, PPO start-up 90-100 s, PPO ~10-13 s a step):
# wheels, tiny model and curriculum ~30 s; SFT (judges alongside) <= SFT_BUDGET_S (torchrun and FSDP start ~35 s,
# then steps at a rate not yet measured on the H200 with the recipe's fixes); probe ~15 s; PPO start-up ~100 s.
# One call of BUDGET_S=540 (the default: SFT_STEPS=200 in <= 150 s) thus leaves ~250 s of PPO, 15-20 steps of one
# seed. 30 steps of each of 2 seeds take three calls, device time ~6 + 8 + 8 minutes:
#   Here: bash scripts/device_wheels.sh rl --no-data
#   1. carry [".whl"], timeout 600:
#        STEPS=0 SFT_STEPS=300 SFT_BUDGET_S=300 bash bench/learning_gpu.sh      (SFT and probe; learning_models.tar)
#      here: rm -rf .carry/learn && mkdir -p .carry/learn && tar -xf FILES_AT/learning_models.tar -C .carry/learn
#   2. carry [".whl", ".carry/learn"], timeout 600:
#        FROM=.carry/learn SEEDS=0 bash bench/learning_gpu.sh                  (PPO 30 steps: ~30 + 100 + 30 x 11.5 s)
#   3. the same with SEEDS=1; then here, over both seeds:
#        python -m cuda_agent.rl.report --learning CALL2/ppo_seed0/steps.jsonl CALL3/ppo_seed1/steps.jsonl
# Read call 1's probe line before calls 2-3: PPO learns only if most samples are exact copies (near-copies are
# built by nvcc, about a minute each, and mostly fail).
# A fresh H100 (2026-12-06, issue 37): verl's SFT step took ~7 s (16 of 200 steps in SFT_BUDGET_S=150): its
# per-token log-prob loop, since loaded in blocks into the SFT trainer too (recipes.py, _sft_logprobs_in_blocks).
# One call for everything (SFT, then PPO for what is left): bash bench/learning_gpu.sh
# CURRICULUM=cuda on DEVICE=cpu (with STEPS=0) trains the CUDA curriculum's SFT on the CPU instead of call 1, unjudged,
# and leaves the probe and learning_models.tar for FROM= on the H200 (2026-12-05: 712 s, 32 of 32 probe samples exact
# copies, bench/results/cpu-2026-12-05-curriculum-sft/; then tar -xf OUT/learning_models.tar -C .carry/learn):
#   DEVICE=cpu CURRICULUM=cuda STEPS=0 SFT_STEPS=300 SFT_BATCH=6 SFT_BUDGET_S=3000 BUDGET_S=3600 bash bench/learning_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DEVICE=${DEVICE:-cuda}
if [ "$DEVICE" = cuda ]; then DEF_SEEDS="0 1" DEF_PARALLEL=1 DEF_SFT_STEPS=200 DEF_SFT_BUDGET=150
else DEF_SEEDS="0 1" DEF_PARALLEL=0 DEF_SFT_STEPS=300 DEF_SFT_BUDGET=1200; fi
STEPS=${STEPS:-30} SEEDS=${SEEDS:-$DEF_SEEDS} PARALLEL=${PARALLEL:-$DEF_PARALLEL} SFT_STEPS=${SFT_STEPS:-$DEF_SFT_STEPS} SFT_BATCH=${SFT_BATCH:-24}
SFT_SAVE=${SFT_SAVE:-50} SFT_BUDGET_S=${SFT_BUDGET_S:-$DEF_SFT_BUDGET} HIDDEN=${HIDDEN:-128} LAYERS=${LAYERS:-2}
N=${N:-16} BUDGET_S=${BUDGET_S:-540} PORT=${PORT:-8765} FROM=${FROM:-} CURRICULUM=${CURRICULUM:-$DEVICE} RAY_STOP=${RAY_STOP:-1}
if [ "$CURRICULUM" != "$DEVICE" ] && [ "$STEPS" != 0 ]; then
  echo "CURRICULUM=$CURRICULUM on DEVICE=$DEVICE trains SFT only: set STEPS=0 (its kernels cannot be judged here)" >&2; exit 2
fi
MAX_RESPONSE=${MAX_RESPONSE:-448}  # DEVICE=cpu only
OUT=${OUT:-/tmp/learning_gpu_out}
START=$(date +%s)
[ -z "$FROM" ] || FROM=$(cd "$FROM" && pwd) || { echo "== FROM=$FROM: no such folder"; exit 2; }
. bench/work_dir.sh && WORK=$(work_dir learning_gpu) || exit 1  # WORK=DIR: there, emptied; else a new mktemp folder
RES=$WORK/results
mkdir -p "$OUT" "$RES"
exec > >(tee -a "$RES/learning_gpu.log") 2>&1

elapsed() { echo $(( $(date +%s) - START )); }
pack() {  # the results so far, replaced whole (a kill during tar leaves the last complete one)
  tar -C "$RES" -cf "$OUT/learning_gpu.tar.part" . 2>/dev/null
  [ $? -le 1 ] && mv -f "$OUT/learning_gpu.tar.part" "$OUT/learning_gpu.tar"  # 1: a log grew while read
}
descendants() { local p; for p in $(pgrep -P "$1" 2>/dev/null); do echo "$p"; descendants "$p"; done; }
stop_group() {  # a process we started with setsid, its group and its descendants: TERM, then KILL
  # torchrun's workers and Ray's daemons run in sessions of their own: on TERM torchrun stops its workers itself,
  # which the wait allows; whatever is left of the descendants listed first is killed by id.
  local pids; pids=$(descendants "$1")
  kill -TERM -- -"$1" 2>/dev/null
  for _ in $(seq 20); do kill -0 -- -"$1" 2>/dev/null || break; sleep 1; done
  kill -KILL -- -"$1" 2>/dev/null
  for p in $pids; do kill -KILL "$p" 2>/dev/null; done
  return 0
}
GROUP="" SERVE="" JUDGES=()
declare -A PPO_PIDS=()
on_exit() {
  local rc=$? pid
  [ -n "$GROUP" ] && stop_group "$GROUP"
  for pid in "${PPO_PIDS[@]}"; do stop_group "$pid"; done
  [ -n "$SERVE" ] && kill "$SERVE" 2>/dev/null
  for pid in "${JUDGES[@]}"; do kill "$pid" 2>/dev/null; done
  echo "== exit $rc at $(elapsed) s; results in $OUT/learning_gpu.tar"
  pack
}
trap on_exit EXIT
trap 'echo "== signalled at $(elapsed) s"; exit 143' TERM INT HUP

if [ "$DEVICE" = cuda ] && ls .whl/*.whl >/dev/null 2>&1; then  # the H200's wheels; elsewhere the venv has them
  . bench/site_wheels.sh && install_wheels
  export PYTHONPATH=/tmp/site:$ROOT PATH=/tmp/site/bin:$PATH
else
  export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
fi
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} RAY_DEDUP_LOGS=0 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
PY=${PY:-python3}
CLI="$PY -m cuda_agent"
echo "== $(date -u +%FT%TZ) $(hostname) device=$DEVICE steps=$STEPS seeds=$SEEDS sft_steps=$SFT_STEPS sft_batch=$SFT_BATCH" \
  "sft_budget_s=$SFT_BUDGET_S budget_s=$BUDGET_S hidden=$HIDDEN layers=$LAYERS n=$N from=${FROM:--}"
if [ "$DEVICE" = cuda ]; then
  nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
  SFT_CPU=()
  # No remove-padding here either: this image has no flash-attn, so verl packs the 16 answers (~2,200 tokens each)
  # into one sequence for sdpa (the CPU profile's `rmpad` trial: actor update 8.7 s against 2.4 s padded). On the
  # H100 this and torch.compile off took update_actor from 10.5 s to 8.5 s only (critic 0.3 s); the rest is likely
  # verl's per-token log-prob loop, now in blocks (cuda_agent/rl/verl_logprobs.py).
  PPO_KNOBS=(--set actor_rollout_ref.model.use_remove_padding=false --set critic.model.use_remove_padding=false)
else  # verl's trainers on our CPU platform; FSDP1 needs a GPU for sync_module_states
  # Sized for 2 cores (bench/results/cpu-2026-12-05-learning/, "Where the time went"): the rollout padded to the
  # CPU curriculum's lengths (prompt 86 tokens, answers ~310; verl's agent loop pads every sequence to
  # max_prompt_length + max_response_length), no remove-padding (without flash-attn the 8 answers become one
  # packed sequence whose sdpa attention costs 3.6x the padded batch's update here), no gradient checkpointing.
  # The SFT recipe itself has no loader workers, torch.compile or gradient checkpointing (its header).
  SFT_CPU=(--set trainer.device=cpu --set engine.strategy=fsdp2 --set engine.dtype=float32)
  PPO_KNOBS=(--set trainer.device=cpu
    --set data.max_prompt_length=128 --set data.max_response_length="$MAX_RESPONSE"
    --set actor_rollout_ref.model.enable_gradient_checkpointing=false --set critic.model.enable_gradient_checkpointing=false
    --set actor_rollout_ref.model.use_remove_padding=false --set critic.model.use_remove_padding=false
    --set actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu="$N" --set critic.ppo_micro_batch_size_per_gpu="$N"
    --set actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu="$N"
    --set actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu="$N")
fi

# 1-2. model and curriculum; every variant judged once in the background (rewards, and the verdict cache PPO's
# repeats hit). The SFT data holds enough copies for all SFT steps to be one epoch: verl's SFT loop restarts its
# loader and empties the CUDA cache (a full gc.collect) at every epoch (recipes/curriculum_sft.yaml's header).
COPIES=$(( (SFT_STEPS * SFT_BATCH + 2) / 3 > 8 ? (SFT_STEPS * SFT_BATCH + 2) / 3 : 8 ))
$CLI train curriculum --device "$CURRICULUM" --out "$WORK/curriculum" --copies "$COPIES" || exit 1
JUDGED=0
if [ "$CURRICULUM" = "$DEVICE" ]; then
  # The judge PPO's reward asks (one `cuda-agent serve` on this device), started now; the curriculum's answers are
  # judged through PPO's own reward function and settings (bench/curriculum_judge.py, which waits for the serve),
  # so their verdicts are in its cache before PPO's first step.
  $CLI serve --port "$PORT" --workspace-root "$WORK" > "$RES/serve.log" 2>&1 &
  SERVE=$!
  JUDGED=1
  $PY bench/curriculum_judge.py "$WORK/curriculum" "$RES" --device "$DEVICE" --sandbox-url "http://127.0.0.1:$PORT" \
    --work-dir "$WORK/answers_first" > "$RES/judged.txt" 2>&1 &
  JUDGES+=($!)
fi
show_judged() {  # waits for the judgements (by id: a bare wait, bash >= 5.1, also waits for the tee behind exec)
  [ "$JUDGED" = 1 ] || return 0
  wait "${JUDGES[@]}"; JUDGES=()
  cat "$RES/judged.txt"
  echo "== curriculum judged at $(elapsed) s"
}

# 3. SFT (torchrun, one GPU), time-boxed; then its latest complete checkpoint's HF folder (the recipe saves hf_model).
if [ -n "$FROM" ]; then
  SFT_HF=$FROM/sft_model CRITIC=$FROM/critic
  [ -f "$SFT_HF/config.json" ] && [ -f "$CRITIC/config.json" ] || { echo "== FROM=$FROM lacks sft_model/ or critic/"; exit 2; }
  echo "== SFT model and critic from $FROM"
else
  $PY bench/tiny_model.py --out "$WORK/tiny" --hidden "$HIDDEN" --layers "$LAYERS" > /dev/null || exit 1
  CRITIC=$WORK/tiny/critic
  mkdir -p "$RES/sft"  # --out: verl's metrics go to $RES/sft/metrics.0.jsonl
  SFT_START=$(date +%s)
  setsid $CLI train rft --config recipes/curriculum_sft.yaml --out "$RES/sft" \
    --set model.path="$WORK/tiny/actor" --set data.train_files="$WORK/curriculum/sft.parquet" \
    --set trainer.total_training_steps="$SFT_STEPS" --set trainer.default_local_dir="$WORK/sft" \
    --set trainer.save_freq="$SFT_SAVE" \
    --set +model.override_config.attn_implementation=sdpa --set model.use_remove_padding=false \
    --set data.train_batch_size="$SFT_BATCH" --set data.micro_batch_size_per_gpu="$(( SFT_BATCH < 8 ? SFT_BATCH : 8 ))" \
    "${SFT_CPU[@]}" > "$RES/sft/train.log" 2>&1 &
  GROUP=$!
  TICK=0
  while kill -0 "$GROUP" 2>/dev/null; do
    sleep 2; TICK=$(( TICK + 2 ))
    if [ $(( $(date +%s) - SFT_START )) -gt "$SFT_BUDGET_S" ] || [ "$(elapsed)" -gt "$BUDGET_S" ]; then
      echo "== SFT stopped by its time box (SFT_BUDGET_S=$SFT_BUDGET_S, BUDGET_S=$BUDGET_S) at $(elapsed) s;" \
        "PPO starts from its latest complete checkpoint"
      stop_group "$GROUP"; break
    fi
    if [ $(( TICK % 30 )) -eq 0 ]; then
      done_steps=$(cat "$RES"/sft/metrics.*.jsonl 2>/dev/null | grep -c '"step"')
      loss=$(tail -n 1 "$RES"/sft/metrics.*.jsonl 2>/dev/null | grep -o '"train/loss": *[-0-9.e+]*' | tail -n 1)
      echo "== SFT at $(elapsed) s: ${done_steps:-0}/$SFT_STEPS steps ${loss:-}; log: $(tail -n 1 "$RES/sft/train.log" | cut -c1-160)"
      pack
    fi
  done
  wait "$GROUP" 2>/dev/null; SFT_RC=$?; GROUP=""
  echo "== SFT exit $SFT_RC at $(elapsed) s ($(( $(date +%s) - SFT_START )) s); last lines:"; tail -n 5 "$RES/sft/train.log"
  # The latest complete checkpoint (verl's tracker file: a half-saved global_step_N is never taken).
  SFT_HF=$($PY -c "import sys; from cuda_agent.rl.launch import latest_checkpoint as last; p = last(sys.argv[1]); print(p / 'huggingface' if p else '')" "$WORK/sft")
  [ -n "$SFT_HF" ] || { echo "== no complete SFT checkpoint: no PPO"; exit 1; }
  echo "== SFT model: $SFT_HF"
  mkdir -p "$WORK/models" && cp -r "$SFT_HF" "$WORK/models/sft_model" && cp -r "$CRITIC" "$WORK/models/critic" &&
    tar -C "$WORK/models" -cf "$OUT/learning_models.tar" sft_model critic && ls -la "$OUT/learning_models.tar"
  pack
fi
if [ -z "$FROM" ]; then  # with FROM the judgements overlap PPO's start-up instead, and the SFT call probed already
  show_judged
  TEMPERATURE=$($PY -c "import yaml; print(yaml.safe_load(open('recipes/curriculum_ppo.yaml'))['overrides']['actor_rollout_ref.rollout.temperature'])")
  $PY bench/curriculum_probe.py "$SFT_HF" "$WORK/curriculum" --temperature "$TEMPERATURE" > "$RES/sft/probe.txt" 2>&1
  cat "$RES/sft/probe.txt"
  pack
fi
[ "$STEPS" -gt 0 ] || { [ "${#JUDGES[@]}" -eq 0 ] || show_judged; echo "== STEPS=0: no PPO"; exit 0; }

# 4. PPO per seed, judged by one sandbox service on this GPU, stopped at BUDGET_S. PARALLEL=1 (the GPU default)
# runs the seeds side by side, each verl run on a Ray cluster of its own (`ray.init` starts a separate local
# cluster per process): the tiny model leaves the GPU idle most of a step, and verl's start-up (~100 s) is paid
# once instead of once per seed. The judge's verdict cache serves both: an answer earns the same in either seed.
ppo_launch() {  # seed: verl's trainer in a process group of its own (PPO_PIDS[seed])
  local seed=$1 run=$RES/ppo_seed$1
  mkdir -p "$run"
  $PY - "$WORK/ppo_recipe$seed.yaml" "$WORK/answers$seed" "http://127.0.0.1:$PORT" "$DEVICE" <<'PY' || return 1
import sys, yaml
recipe = yaml.safe_load(open("recipes/curriculum_ppo.yaml"))
# under serve's workspace root; the judge times on DEVICE
recipe["reward_function"].update(work_dir=sys.argv[2], sandbox_url=sys.argv[3], device=sys.argv[4])
yaml.safe_dump(recipe, open(sys.argv[1], "w"))
PY
  setsid $CLI train single-turn --config "$WORK/ppo_recipe$seed.yaml" --out "$run" \
    --set actor_rollout_ref.model.path="$SFT_HF" --set critic.model.path="$CRITIC" \
    --set data.train_files="$WORK/curriculum/rl.parquet" --set data.val_files="$WORK/curriculum/rl.parquet" \
    --set data.seed="$seed" --set actor_rollout_ref.rollout.seed="$seed" --set actor_rollout_ref.rollout.n="$N" \
    --set trainer.total_training_steps="$STEPS" --set trainer.default_local_dir="$WORK/ppo$seed" \
    --set actor_rollout_ref.actor.strategy=fsdp2 --set critic.strategy=fsdp2 \
    --set +actor_rollout_ref.model.override_config.attn_implementation=sdpa \
    --set "+actor_rollout_ref.actor.fsdp_config.mixed_precision={param_dtype:fp32,reduce_dtype:fp32,buffer_dtype:fp32}" \
    --set actor_rollout_ref.rollout.dtype=float32 --set actor_rollout_ref.rollout.calculate_log_probs=true \
    --set actor_rollout_ref.rollout.agent.num_workers=2 \
    --set actor_rollout_ref.actor.fsdp_config.use_torch_compile=false \
    --set actor_rollout_ref.ref.fsdp_config.use_torch_compile=false --set critic.fsdp.use_torch_compile=false \
    --set +ray_kwargs.ray_init.namespace=cuda-agent --set +ray_kwargs.ray_init.include_dashboard=false \
    "${PPO_KNOBS[@]}" > "$run/train.log" 2>&1 &
  PPO_PIDS[$seed]=$!
}
ppo_steps() { cat "$RES/ppo_seed$1"/metrics.*.jsonl 2>/dev/null | grep -c '"step"'; }
if [ "$PARALLEL" = 1 ]; then ROUNDS=("$SEEDS"); else read -ra ROUNDS <<< "$SEEDS"; fi
for round in "${ROUNDS[@]}"; do
  if [ $(( BUDGET_S - $(elapsed) )) -lt 120 ]; then  # verl's start-up alone takes ~100 s on the H200
    echo "== $(( BUDGET_S - $(elapsed) )) s of BUDGET_S=$BUDGET_S left: no time for seed(s) $round"; break
  fi
  for seed in $round; do ppo_launch "$seed" || exit 1; done
  TICK=0
  while :; do
    alive=0
    for seed in $round; do kill -0 "${PPO_PIDS[$seed]}" 2>/dev/null && alive=1; done
    [ "$alive" = 1 ] || break
    sleep 2; TICK=$(( TICK + 2 ))
    if [ "$(elapsed)" -gt "$BUDGET_S" ]; then
      echo "== time budget of ${BUDGET_S}s spent during seed(s) $round"
      for seed in $round; do stop_group "${PPO_PIDS[$seed]}"; done
      break
    fi
    if [ $(( TICK % 30 )) -eq 0 ]; then
      for seed in $round; do
        score=$(tail -n 1 "$RES/ppo_seed$seed"/metrics.*.jsonl 2>/dev/null | grep -o '"critic/score/mean": *[-0-9.e+]*' | tail -n 1)
        echo "== seed $seed at $(elapsed) s: $(ppo_steps "$seed")/$STEPS steps ${score:-}"
      done
      pack
    fi
  done
  for seed in $round; do
    wait "${PPO_PIDS[$seed]}" 2>/dev/null; PPO_RC=$?; unset "PPO_PIDS[$seed]"
    echo "== seed $seed exit $PPO_RC at $(elapsed) s, $(ppo_steps "$seed") steps"
    tail -n 3 "$RES/ppo_seed$seed/train.log"
  done
  [ "$DEVICE" = cuda ] && [ "$RAY_STOP" = 1 ] && ray stop --force > /dev/null 2>&1  # elsewhere other Ray clusters may run: the group kill must do
  for seed in $round; do $CLI train report "$RES/ppo_seed$seed"; done
  pack
done
# Where verl's start-up goes (~100 s on a GPU machine, ~35 s on the 2-core VM): each actor's registration and
# creation as Ray's GCS logged them, per cluster this script started (the logs outlive `ray stop`).
for log in $(find /tmp/ray -maxdepth 3 -path '*/logs/gcs_server.out' -newermt "@$START" 2>/dev/null); do
  { echo "# $log"; grep -h "Registering actor\|Actor created successfully" "$log"; } >> "$RES/ray_actors.log"
done
kill "$SERVE" 2>/dev/null; SERVE=""
[ "${#JUDGES[@]}" -eq 0 ] || show_judged

# 5. The learning check over the seeds that ran.
if ls "$RES"/ppo_seed*/steps.jsonl > /dev/null 2>&1; then
  if $PY -m cuda_agent.rl.report --learning "$RES"/ppo_seed*/steps.jsonl > "$RES/learning.txt" 2>&1; then
    cat "$RES/learning.txt"
  else
    echo "== no learning check: $(tail -n 1 "$RES/learning.txt")"
  fi
fi
echo "== total $(elapsed) s"
