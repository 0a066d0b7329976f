#!/usr/bin/env bash
# "Learning is visible" on one H200 (issue 21): a tiny model learns the curriculum (README "Training on verl",
# cuda_agent/rl/curriculum.py) with verl's own trainers and rewards from the real CUDA sandbox.
#
#   1. a tiny random Qwen2 actor and critic (bench/tiny_model.py; nothing downloaded);
#   2. the curriculum: three single-turn answers for examples/scale_add: fast (reward 2-3), slow (1), wrong (-1);
#      each is judged once here first (`cuda-agent judge`), which shows their rewards and fills the verdict cache;
#   3. SFT with verl's SFT trainer on all three in equal shares (`cuda-agent train rft --config
#      recipes/curriculum_sft.yaml`): the model then answers with one of them at random;
#   4. PPO with verl's trainer (`cuda-agent train single-turn --config recipes/curriculum_ppo.yaml`), per seed, STEPS
#      steps, judged by a `cuda-agent serve` on the same GPU; verl's file logger writes every step's metrics;
#   5. per seed `cuda-agent train report` (steps.jsonl, report.html with the reward curve), and the learning check:
#      the mean reward of the last 5 steps beats the first 5 by more than 3 standard errors, over the seeds
#      (`python -m cuda_agent.rl.report --learning ...`).
# Everything lands in $OUT/learning_gpu.tar.
#
# Knobs (env): STEPS=30 SEEDS="0 1" SFT_STEPS=300 SFT_BATCH=24 HIDDEN=128 LAYERS=2 N=16 (answers per step) BUDGET_S=540
# DEVICE=cuda (default) or cpu: on the CPU, verl runs on our CPU platform (trainer.device=cpu, cuda_agent.rl.verl_cpu;
# the SFT step through cuda_agent.rl.sft_cpu, verl's SFT trainer with a gloo group), the curriculum is the CPU one
# (one-file C++ answers of ~310 tokens, a 2-line prompt: cuda_agent/rl/curriculum.py) and the judge times on the CPU.
# MAX_RESPONSE=448 (CPU only: the rollout's length limit). CPU run of 2026-12-05 (bench/results/cpu-2026-12-05-learning/,
# 27 minutes on 2 shared cores): SFT 300 steps in ~8 min, every probe sample an exact copy; PPO ~12 s a step; the
# learning check over 2 seeds: first 5 steps 1.45, last 5 2.8, 5.5 standard errors, visible:
#   DEVICE=cpu STEPS=30 SEEDS="0 1" SFT_STEPS=300 SFT_BATCH=6 N=8 BUDGET_S=3000 bash bench/learning_gpu.sh
# Here: bash scripts/device_wheels.sh rl --no-data ; carry [".whl"]
# There (repository root): bash bench/learning_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
STEPS=${STEPS:-30} SEEDS=${SEEDS:-"0 1"} SFT_STEPS=${SFT_STEPS:-300} HIDDEN=${HIDDEN:-128} LAYERS=${LAYERS:-2}
N=${N:-16} BUDGET_S=${BUDGET_S:-540} PORT=${PORT:-8765} DEVICE=${DEVICE:-cuda} SFT_BATCH=${SFT_BATCH:-24}
MAX_RESPONSE=${MAX_RESPONSE:-448}  # DEVICE=cpu only
OUT=${OUT:-/tmp/learning_gpu_out} WORK=${WORK:-/tmp/learning_gpu}
RES=$WORK/results
START=$(date +%s)
rm -rf "$WORK"; mkdir -p "$OUT" "$WORK" "$RES"
exec > >(tee -a "$RES/learning_gpu.log") 2>&1

if [ "$DEVICE" = cuda ] && ls .whl/*.whl >/dev/null 2>&1; then  # the H200's wheels; elsewhere the venv has them
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:$ROOT PATH=/tmp/site/bin:$PATH
else
  export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
fi
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} RAY_DEDUP_LOGS=0 TOKENIZERS_PARALLELISM=false
PY=${PY:-python3}
CLI="$PY -m cuda_agent"
echo "== $(date -u +%FT%TZ) $(hostname) device=$DEVICE steps=$STEPS seeds=$SEEDS sft_steps=$SFT_STEPS sft_batch=$SFT_BATCH hidden=$HIDDEN layers=$LAYERS n=$N"
if [ "$DEVICE" = cuda ]; then
  nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
  SFT_CPU=() PPO_CPU=()
else  # verl's trainers on our CPU platform; FSDP1 needs a GPU for sync_module_states, torch.compile only slows a tiny model
  # Sized for 2 cores (bench/results/cpu-2026-12-05-learning/, "Where the time went"): the rollout padded to the
  # CPU curriculum's lengths (prompt 86 tokens, answers ~310; verl's agent loop pads every sequence to
  # max_prompt_length + max_response_length), no remove-padding (without flash-attn the 8 answers become one
  # packed sequence whose sdpa attention costs 3.6x the padded batch's update here), no gradient checkpointing,
  # no data-loader workers.
  SFT_CPU=(--set trainer.device=cpu --set engine.strategy=fsdp2 --set engine.use_torch_compile=false --set engine.dtype=float32
    --set trainer.save_freq="$SFT_STEPS" --set model.enable_gradient_checkpointing=false --set data.num_workers=0)
  PPO_CPU=(--set trainer.device=cpu --set +ray_kwargs.ray_init.include_dashboard=false
    --set data.max_prompt_length=128 --set data.max_response_length="$MAX_RESPONSE"
    --set actor_rollout_ref.model.enable_gradient_checkpointing=false --set critic.model.enable_gradient_checkpointing=false
    --set actor_rollout_ref.model.use_remove_padding=false --set critic.model.use_remove_padding=false
    --set actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu="$N" --set critic.ppo_micro_batch_size_per_gpu="$N"
    --set actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu="$N"
    --set actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu="$N")
fi
elapsed() { echo $(( $(date +%s) - START )); }

# 1-2. model and curriculum; every variant judged once (rewards, and the verdict cache PPO's repeats hit).
$PY bench/tiny_model.py --out "$WORK/tiny" --hidden "$HIDDEN" --layers "$LAYERS" > /dev/null || exit 1
$CLI train curriculum --device "$DEVICE" --out "$WORK/curriculum" || exit 1
JUDGES=()
for v in fast slow wrong; do
  $CLI judge examples/scale_add "$WORK/curriculum/answers/scale_add/$v" --device "$DEVICE" --json > "$RES/judge_$v.json" &
  JUDGES+=($!)
done
wait "${JUDGES[@]}"  # by id: a bare wait (bash >= 5.1) also waits for the tee behind exec, forever
$PY - "$RES" <<'PY'
import json, sys
for v in ("fast", "slow", "wrong"):
    d = json.load(open(f"{sys.argv[1]}/judge_{v}.json"))
    print(f"== judged {v}: {d['verdict']} reward {d['reward']} timings_ms {d['timings_ms']}")
PY
echo "== curriculum judged at $(elapsed) s"

# 3. SFT (torchrun, one GPU), then its last checkpoint's HF folder (the recipe saves hf_model).
mkdir -p "$RES/sft"  # --out: verl's metrics go to $RES/sft/metrics.0.jsonl
$CLI train rft --config recipes/curriculum_sft.yaml --out "$RES/sft" \
  --set model.path="$WORK/tiny/actor" --set data.train_files="$WORK/curriculum/sft.parquet" \
  --set trainer.total_training_steps="$SFT_STEPS" --set trainer.default_local_dir="$WORK/sft" \
  --set +model.override_config.attn_implementation=sdpa --set model.use_remove_padding=false \
  --set data.train_batch_size="$SFT_BATCH" --set data.micro_batch_size_per_gpu="$(( SFT_BATCH < 8 ? SFT_BATCH : 8 ))" \
  "${SFT_CPU[@]}" \
  > "$RES/sft/train.log" 2>&1
echo "== SFT exit $? at $(elapsed) s; last lines:"; tail -n 5 "$RES/sft/train.log"
# The latest complete checkpoint (verl's tracker file: a half-saved global_step_N is never taken).
SFT_HF=$($PY -c "import sys; from cuda_agent.rl.launch import latest_checkpoint as last; p = last(sys.argv[1]); print(p / 'huggingface' if p else '')" "$WORK/sft")
[ -n "$SFT_HF" ] || { echo "== no SFT checkpoint"; tar -C "$RES" -cf "$OUT/learning_gpu.tar" .; exit 1; }
TEMPERATURE=$($PY -c "import yaml; print(yaml.safe_load(open('recipes/curriculum_ppo.yaml'))['overrides']['actor_rollout_ref.rollout.temperature'])")
$PY bench/curriculum_probe.py "$SFT_HF" "$WORK/curriculum" --temperature "$TEMPERATURE" > "$RES/sft/probe.txt" 2>&1
cat "$RES/sft/probe.txt"

# 4. PPO per seed, judged by one sandbox service on this GPU.
$CLI serve --port "$PORT" --workspace-root "$WORK" > "$RES/serve.log" 2>&1 &
SERVE=$!
sleep 5
for seed in $SEEDS; do
  run=$RES/ppo_seed$seed; mkdir -p "$run"
  $PY - "$WORK/ppo_recipe$seed.yaml" "$WORK/answers$seed" "http://127.0.0.1:$PORT" "$DEVICE" <<'PY' || exit 1
import sys, yaml
recipe = yaml.safe_load(open("recipes/curriculum_ppo.yaml"))
# under serve's workspace root; the judge times on DEVICE
recipe["reward_function"].update(work_dir=sys.argv[2], sandbox_url=sys.argv[3], device=sys.argv[4])
yaml.safe_dump(recipe, open(sys.argv[1], "w"))
PY
  setsid $CLI train single-turn --config "$WORK/ppo_recipe$seed.yaml" --out "$run" \
    --set actor_rollout_ref.model.path="$SFT_HF" --set critic.model.path="$WORK/tiny/critic" \
    --set data.train_files="$WORK/curriculum/rl.parquet" --set data.val_files="$WORK/curriculum/rl.parquet" \
    --set data.seed="$seed" --set actor_rollout_ref.rollout.seed="$seed" --set actor_rollout_ref.rollout.n="$N" \
    --set trainer.total_training_steps="$STEPS" --set trainer.default_local_dir="$WORK/ppo$seed" \
    --set actor_rollout_ref.actor.strategy=fsdp2 --set critic.strategy=fsdp2 \
    --set +actor_rollout_ref.model.override_config.attn_implementation=sdpa \
    --set "+actor_rollout_ref.actor.fsdp_config.mixed_precision={param_dtype:fp32,reduce_dtype:fp32,buffer_dtype:fp32}" \
    --set actor_rollout_ref.rollout.dtype=float32 --set actor_rollout_ref.rollout.calculate_log_probs=true \
    --set actor_rollout_ref.rollout.agent.num_workers=2 \
    --set +ray_kwargs.ray_init.namespace=cuda-agent "${PPO_CPU[@]}" \
    > "$run/train.log" 2>&1 &
  PID=$!
  while kill -0 "$PID" 2>/dev/null; do
    sleep 3
    if [ "$(elapsed)" -gt "$BUDGET_S" ]; then
      echo "== time budget of ${BUDGET_S}s spent during seed $seed"; kill -9 -- -"$PID" 2>/dev/null; break
    fi
  done
  wait "$PID" 2>/dev/null; echo "== seed $seed exit $? at $(elapsed) s, $(grep -c '"step"' "$run/metrics.0.jsonl" 2>/dev/null) steps"
  tail -n 3 "$run/train.log"
  [ "$DEVICE" = cuda ] && ray stop --force > /dev/null 2>&1  # elsewhere other Ray clusters may run: the group kill must do
  $CLI train report "$run"
done
kill "$SERVE" 2>/dev/null

# 5. The learning check over the seeds.
$PY -m cuda_agent.rl.report --learning "$RES"/ppo_seed*/steps.jsonl | tee "$RES/learning.txt"
echo "== total $(elapsed) s"
tar -C "$RES" -cf "$OUT/learning_gpu.tar" . && ls -la "$OUT/learning_gpu.tar"
