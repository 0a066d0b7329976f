#!/usr/bin/env bash
# verl's own trainer loop on one H200 (issue 21): `cuda-agent train agentic-ppo` (RayPPOTrainer.fit on a local Ray,
# our CudaAgentLoop, the `hf` rollout on transformers, rewards from the real CUDA sandbox judged on the same GPU),
# a tiny model made here (bench/tiny_model.py; nothing downloaded).
#
# What it shows, per seed (seed<S>/ of the results, packed into $OUT/train_gpu.tar):
#   - STEPS steps of the trainer loop; verl's per-step metrics as JSONL (run/metrics.0.jsonl, and run/metrics.1.jsonl
#     for the resumed launch: rewards,
#     cuda_agent/* episode metrics, losses, KL, grad norms, timing_s/* split);
#   - weight sync: verl's token-level importance weights exp(actor - rollout log-prob) each step (the rollout's
#     log-probs against the fp32 actor's recomputation), and probe.jsonl: a fixed sequence scored on the rollout
#     server every few seconds (bench/train_gpu_probe.py), whose log-probs change after each step's sync;
#   - kill and resume (first seed, KILL_AT > 0): the run is killed (SIGKILL, whole process group) during step
#     KILL_AT+2, after the checkpoint of step KILL_AT; `--resume` must start at step KILL_AT+1 with the same
#     batch, and its metrics are compared with the killed run's step KILL_AT+1;
#   - summary.json and the checks' verdicts (bench/train_gpu_report.py).
#
# Knobs (env): STEPS=30 SEEDS="0" KILL_AT=10 SAVE_FREQ=5 BATCH=8 RESPONSE=256 TURNS=2 LR=1e-5 CRITIC_LR=1e-4
#   DATA=<verl RL parquet> (default: the bundled examples, `cuda-agent train data --suite examples`)
#   ACTOR=<HF folder> CRITIC=<HF folder> (default: a tiny random Qwen2 pair), EXTRA="--set k=v ..." (more overrides)
#   RECIPE=<stage recipe> (default recipes/agentic_ppo.yaml), BUDGET_S=540 (stops the last run in time)
#
# Here: bash scripts/device_wheels.sh rl --no-data ; carry [".whl"] (the tree + wheels stay under 64 MiB)
# There (repository root):
#   bash bench/train_gpu.sh
# CPU smoke run of the same script (no GPU; tiny, slow): DEVICE=cpu STEPS=2 KILL_AT=0 BATCH=1 bash bench/train_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
STEPS=${STEPS:-30} SEEDS=${SEEDS:-0} KILL_AT=${KILL_AT:-10} SAVE_FREQ=${SAVE_FREQ:-5} BATCH=${BATCH:-8}
RESPONSE=${RESPONSE:-256} TURNS=${TURNS:-2} LR=${LR:-1e-5} CRITIC_LR=${CRITIC_LR:-1e-4} DEVICE=${DEVICE:-cuda}
BUDGET_S=${BUDGET_S:-540} RECIPE=${RECIPE:-recipes/agentic_ppo.yaml} EXTRA=${EXTRA:-}
OUT=${OUT:-/tmp/train_gpu_out} WORK=${WORK:-/tmp/train_gpu}
RES=$WORK/results
START=$(date +%s)
rm -rf "$RES"; mkdir -p "$OUT" "$WORK" "$RES"
exec > >(tee -a "$RES/train_gpu.log") 2>&1
pack() { tar -C "$RES" -cf "$OUT/train_gpu.tar" . 2>/dev/null; }
trap pack EXIT  # also when the device call's limit cuts the run: what ran so far comes back

PY=${PY:-python3}
if ! $PY -c "import verl, ray" >/dev/null 2>&1 && ls .whl/*.whl >/dev/null 2>&1; then  # the H200 image lacks both
  . bench/site_wheels.sh && install_wheels "$PY"
  export PYTHONPATH=/tmp/site:$ROOT PATH=/tmp/site/bin:$PATH
else
  export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
fi
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} RAY_DEDUP_LOGS=0 TOKENIZERS_PARALLELISM=false
echo "== $(date -u +%FT%TZ) $(hostname) device=$DEVICE steps=$STEPS seeds=$SEEDS kill_at=$KILL_AT batch=$BATCH"
[ "$DEVICE" = cuda ] && nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader

if [ "$KILL_AT" -gt 0 ] && { [ $((KILL_AT % SAVE_FREQ)) != 0 ] || [ $(((KILL_AT + 1) % SAVE_FREQ)) = 0 ]; }; then
  echo "warning: KILL_AT=$KILL_AT with SAVE_FREQ=$SAVE_FREQ: the resume check wants a checkpoint at step KILL_AT and none at KILL_AT+1"
fi
if [ -z "${ACTOR:-}" ]; then
  $PY bench/tiny_model.py --out "$WORK/tiny" >/dev/null || exit 1
  ACTOR=$WORK/tiny/actor CRITIC=$WORK/tiny/critic
fi
CRITIC=${CRITIC:-$ACTOR}
if [ -z "${DATA:-}" ]; then
  DATA=$WORK/examples_$DEVICE.parquet
  $PY -m cuda_agent train data --suite examples --device "$DEVICE" --out "$DATA" || exit 1
  # Six examples: repeated so every epoch holds several batches (verl drops an incomplete last batch).
  $PY - "$DATA" "$BATCH" <<'PY' || exit 1
import sys, pyarrow as pa, pyarrow.parquet as pq
table, batch = pq.read_table(sys.argv[1]), int(sys.argv[2])
copies = max(1, -(-4 * batch // table.num_rows))
pq.write_table(pa.concat_tables([table] * copies), sys.argv[1])
print(f"{table.num_rows} examples x {copies} = {table.num_rows * copies} rows")
PY
fi

# The recipe, for one GPU: judging shares the training GPU (a one-GPU demo), episodes under $WORK.
$PY - "$RECIPE" "$WORK/recipe.yaml" "$DEVICE" "$WORK/rollouts" <<'PY' || exit 1
import sys, yaml
recipe = yaml.safe_load(open(sys.argv[1]))
recipe["agent_loop"].update(device=sys.argv[3], work_dir=sys.argv[4], share_training_gpus=True)
yaml.safe_dump(recipe, open(sys.argv[2], "w"))
PY

# verl's torch.compile is off (actor, ref, critic): on a tiny model it only costs time, ~30 s of inductor in each
# launch's first step on the H200 (bench/results/h200-2026-12-05-b/README.md), twice with kill/resume.
train() {  # train SEED RUN_DIR [--resume]: each launch logs to RUN_DIR/metrics.<n>.jsonl, n = 0, 1, ...
  local seed=$1 run=$2 micro=$((BATCH < 4 ? BATCH : 4)) loops=$((BATCH % 2 ? 1 : 2)); shift 2
  mkdir -p "$run"
  setsid $PY -m cuda_agent train agentic-ppo --config "$WORK/recipe.yaml" --out "$run" \
    --set actor_rollout_ref.model.path="$ACTOR" --set critic.model.path="$CRITIC" \
    --set critic.model.trust_remote_code=true \
    --set data.train_files="$DATA" --set data.val_files="$DATA" --set data.seed="$seed" \
    --set data.train_batch_size="$BATCH" --set data.val_batch_size="$BATCH" \
    --set data.max_prompt_length=4096 --set data.max_response_length="$RESPONSE" \
    --set actor_rollout_ref.actor.ppo_mini_batch_size="$BATCH" \
    --set actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=$micro --set critic.ppo_micro_batch_size_per_gpu=$micro \
    --set actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=$micro \
    --set actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=$micro \
    --set actor_rollout_ref.actor.ulysses_sequence_parallel_size=1 --set critic.ulysses_sequence_parallel_size=1 \
    --set actor_rollout_ref.actor.strategy=fsdp2 --set critic.strategy=fsdp2 \
    --set actor_rollout_ref.actor.optim.lr="$LR" --set critic.optim.lr="$CRITIC_LR" \
    --set +actor_rollout_ref.model.override_config.attn_implementation=sdpa \
    --set "+actor_rollout_ref.actor.fsdp_config.mixed_precision={param_dtype:fp32,reduce_dtype:fp32,buffer_dtype:fp32}" \
    --set actor_rollout_ref.rollout.name=hf --set actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
    --set actor_rollout_ref.actor.fsdp_config.use_torch_compile=false \
    --set actor_rollout_ref.ref.fsdp_config.use_torch_compile=false --set critic.fsdp.use_torch_compile=false \
    --set actor_rollout_ref.rollout.dtype=float32 --set actor_rollout_ref.rollout.calculate_log_probs=true \
    --set actor_rollout_ref.rollout.seed="$seed" \
    --set actor_rollout_ref.rollout.multi_turn.max_assistant_turns="$TURNS" \
    --set actor_rollout_ref.rollout.agent.num_workers=$loops \
    --set algorithm.rollout_correction.rollout_is=token \
    --set trainer.device="$DEVICE" --set trainer.n_gpus_per_node=1 \
    --set trainer.total_training_steps="$STEPS" --set trainer.save_freq="$SAVE_FREQ" \
    --set trainer.test_freq=-1 --set trainer.val_before_train=false --set "trainer.logger=[console,file]" \
    --set trainer.default_local_dir="$WORK/seed$seed/checkpoints" \
    --set +ray_kwargs.ray_init.namespace=cuda-agent --set +ray_kwargs.ray_init.include_dashboard=false \
    $EXTRA "$@" >> "$run/train.log" 2>&1 &
  TRAIN_PID=$!
}

steps_done() { if [ -f "$1" ]; then grep -c '"step"' "$1"; else echo 0; fi; }

stop_everything() {  # a killed driver can leave Ray's daemons and judge workers behind (the GPU machine is ours alone)
  [ "$DEVICE" = cuda ] || return 0  # elsewhere other Ray clusters may run: the process-group kill must do
  ray stop --force >/dev/null 2>&1 || $PY -c "import ray.scripts.scripts as s; s.main()" stop --force >/dev/null 2>&1
  for pid in $(pgrep -f "cuda_agent.judge.child.grader" || true); do kill -9 "$pid" 2>/dev/null; done
  sleep 2
}

for seed in $SEEDS; do
  dir=$RES/seed$seed
  rm -rf "$dir" "$WORK/seed$seed" "$WORK/rollouts"; mkdir -p "$dir"
  $PY bench/train_gpu_probe.py --tokenizer "$ACTOR" --out "$dir/probe.jsonl" > "$dir/probe.log" 2>&1 &
  PROBE=$!
  train "$seed" "$dir/run"
  killed=0
  while kill -0 "$TRAIN_PID" 2>/dev/null; do
    sleep 2
    done_steps=$(steps_done "$dir/run/metrics.0.jsonl")
    if [ "$KILL_AT" -gt 0 ] && [ "$seed" = "${SEEDS%% *}" ] && [ "$done_steps" -ge $((KILL_AT + 1)) ]; then
      sleep 3  # into step KILL_AT+2: killed mid-step
      echo "== killing the run during step $((KILL_AT + 2)) (pid group $TRAIN_PID)"
      kill -9 -- -"$TRAIN_PID" 2>/dev/null; wait "$TRAIN_PID" 2>/dev/null; killed=1
      cp "$WORK/seed$seed/checkpoints/latest_checkpointed_iteration.txt" "$dir/checkpoint_at_kill.txt" 2>/dev/null
      stop_everything
      break
    fi
    if [ $(( $(date +%s) - START )) -gt "$BUDGET_S" ]; then
      echo "== time budget of ${BUDGET_S}s spent: stopping at step $done_steps"
      kill -9 -- -"$TRAIN_PID" 2>/dev/null; wait "$TRAIN_PID" 2>/dev/null; stop_everything; break
    fi
  done
  wait "$TRAIN_PID" 2>/dev/null; echo "== phase 1 exit $? after $(steps_done "$dir/run/metrics.0.jsonl") steps"
  if [ "$killed" = 1 ]; then
    $PY bench/train_gpu_probe.py --tokenizer "$ACTOR" --out "$dir/probe.jsonl" >> "$dir/probe.log" 2>&1 &
    PROBE=$!
    train "$seed" "$dir/run" --resume
    while kill -0 "$TRAIN_PID" 2>/dev/null; do
      sleep 2
      if [ $(( $(date +%s) - START )) -gt "$BUDGET_S" ]; then
        echo "== time budget of ${BUDGET_S}s spent during the resumed run"
        kill -9 -- -"$TRAIN_PID" 2>/dev/null; wait "$TRAIN_PID" 2>/dev/null; stop_everything; break
      fi
    done
    wait "$TRAIN_PID" 2>/dev/null; echo "== phase 2 (resumed) exit $? after $(steps_done "$dir/run/metrics.1.jsonl") steps"
  fi
  kill "$PROBE" 2>/dev/null; wait "$PROBE" 2>/dev/null
  stop_everything
  ls "$WORK/seed$seed/checkpoints" > "$dir/checkpoints.txt" 2>/dev/null
  cp "$WORK/recipe.yaml" "$dir/"
done

$PY bench/train_gpu_report.py "$RES" --steps "$STEPS" --kill-at "$KILL_AT" | tee "$RES/report.txt"
echo "== total $(( $(date +%s) - START )) s"
sleep 1
pack; ls -la "$OUT/train_gpu.tar"
