#!/usr/bin/env bash
# SmolLM2-135M-Instruct learns the agent's craft on one GPU (issue 37): the agentic curriculum's scripted multi-turn
# episodes played on CUDA, verl's SFT on them, then agentic PPO through CudaAgentLoop judged by `cuda-agent serve`,
# the held-out tasks as verl's validation before and after. The model (a 94 MiB GGUF) and verl with Ray (36 MiB of
# wheels) pass the 64 MiB a device call carries, so the work is split over device calls that follow each other
# while the machine is warm (it keeps /tmp ~30 s after a call): WORK=/tmp/agentic_gpu holds the state between them.
#
#   here:   bash bench/agentic_gpu.sh here
#           (.whl/: the wheels of `scripts/device_wheels.sh rl --no-data`; .stage/1..6: the GGUF in 16 MiB chunks and
#            .stage/whl: gguf's wheel; .stage/tok: SmolLM2's tokenizer with the tools chat template)
#   call 1: carry [".whl", ".stage/tok"]:  bash bench/agentic_gpu.sh data
#           the scripted episodes (8 training tasks x 6 scripts) played on CUDA -> $WORK/data/{sft,rl,heldout}.parquet
#           (its figures on an H100: bench/results/h100-2026-12-07/)
#   call 2: carry [".stage/2", ".stage/3", ".stage/4"]: bash bench/agentic_gpu.sh put 2 3 4
#   call 3: carry [".stage/1", ".stage/5", ".stage/6", ".stage/whl"]: bash bench/agentic_gpu.sh train
#           the GGUF joined and converted (/tmp/smollm2), SFT (SFT_STEPS, time-boxed by SFT_BUDGET_S), the critic from
#           the SFT model warmed up on the SFT episodes replayed, actor frozen (recipes/agentic_critic_warmup.yaml:
#           CRITIC_STEPS steps of BATCH x N episodes, time-boxed by CRITIC_BUDGET_S, value loss per step in
#           results/critic/steps.jsonl), then PPO from that critic (STEPS steps of BATCH tasks x N episodes,
#           validation on the held-out tasks before the first step and after the last) until BUDGET_S of the call.
#   call 4 (optional, same machine): STEPS=8 bash bench/agentic_gpu.sh more  (PPO resumed from its last checkpoint)
#   more seeds (same machine, after a train call): SEED=1 bash bench/agentic_gpu.sh ppo, then SEED=2: PPO afresh from
#           the SFT model and critic the train call made, with seed SEED (verl's data shuffle and the rollout's
#           sampling); each seed's run is results/ppo_s$SEED, and every call ends with the report over all seeds so far
#           (`cuda-agent train report results/ppo_s* --out results/report`: the before/after table per seed).
# One verl run across calls: `DETACH=1 BUDGET_S=1500 ... bash bench/agentic_gpu.sh train` starts the phase in a process
# session of its own (the machine keeps it while warm) and follows it FOLLOW_S (570) s; each `bash bench/agentic_gpu.sh
# follow` call, made at once after the one before, follows it FOLLOW_S more, its results so far in $OUT/agentic_gpu.tar.
# BUDGET_S then bounds the whole run (PPO stops at START + BUDGET_S), not one call; no Ray start-up between calls.
# Validation runs on the held-out tasks and (VAL_TRAIN=1) on the training tasks, as two data sources
# (agentic/held_out, agentic/train) of one pass, before the first step and after the last: both measured the same
# way. verl dumps every validation and training episode (validation_data/ and rollout_data/ of the run).
# With the committed data (DATA=, below) the data call is not needed: call 1 carries [".whl", ".stage/1"] and runs
# `bash bench/agentic_gpu.sh put 1`, call 3 carries [".stage/5", ".stage/6", ".stage/whl"] and runs
# `DATA=bench/results/h100-2026-12-07/agentic_data.tar bash bench/agentic_gpu.sh train`.
# Every call packs what it made into $OUT/agentic_gpu.tar (logs, verl's metrics, the data's manifest, reports), also
# every 30 s and on every exit, so a call cut by the device's limit still returns what it did.
# Knobs (env): SFT_STEPS=60 SFT_BUDGET_S=240 STEPS=4 BATCH=4 N=4 VAL_N=4 MAX_TURNS=16 BUDGET_S=570 PARALLEL=12
# (episodes played at a time while making the data) PORT=8766 SCRIPTS= (a comma-separated subset of the scripts)
# SEED=0 VAL_TRAIN=1 (0: validate on the held-out tasks only, a third of the validation's episodes) VAL=1 (0: no
# validation at all, before or after: for a run too short to pay for it, whose training rollouts are its record)
# CRITIC_STEPS=4 (0: no warm-up, PPO's critic is the fresh head) CRITIC_BUDGET_S=240 CRITIC_LR=1e-4 (the warm-up's;
# recipes/agentic_critic_warmup.yaml says why); ACTOR_LR=1e-5 (the PPO recipe's 1e-6 moves a 135M policy too little in
# a handful of steps to see) PPO_EPOCHS=2 (actor and critic, in PPO and in the warm-up).
# SFT_LR=1e-4: the SFT's peak learning rate (the recipe's 2e-5 left SmolLM2 at 0.15 nats a token on the first reply
# that all 48 episodes share after 60 steps, its greedy reply not the trained one: bench/results/h100-2026-12-07-d/).
# DECODE=eager: how the hf rollout decodes (actor_rollout_ref.rollout.engine_kwargs.hf.decode): eager, static, or graphs
# (a static KV cache, each decode step replayed as a CUDA graph: cuda_agent/rl/hf_rollout/static_decode.py).
# TEMPERATURE=0.7: the rollout's and validation's sampling temperature (verl's actor recomputes log-probs at it);
# SmolLM2 after SFT sampled at 1.0 wrote free text in two turns of three and no kernel (bench/results/h100-2026-12-07-c/).
# PROBE_OTHER=TAR: after SFT, bench/sft_probe.py also runs the SFT'd model on that data's prompts (another tool
# description, say) beside the ones it was trained on.
# DATA=TAR: the data call's agentic_data.tar instead of the data call (bench/results/h100-2026-12-07/ holds one,
# made on an H100: the train call then needs only the model's chunks).
# TOKENIZER=DIR (.stage/tok): the policy's tokenizer folder with config.json, for the data call.
# MODEL=DIR: the policy to fine-tune instead of the staged SmolLM2 (any instruct model of a chat template with tools).
# DEVICE=cpu: the same on the CPU curriculum, verl on our CPU platform and, without MODEL, a tiny random Llama in
# SmolLM2's tokens (bench/tiny_llama.py): the wiring check of this script without a GPU, e.g.
#   DEVICE=cpu SCRIPTS=give_up PARALLEL=2 bash bench/agentic_gpu.sh data
#   DEVICE=cpu SFT_STEPS=2 CRITIC_STEPS=2 STEPS=1 BATCH=1 N=2 VAL_N=1 MAX_TURNS=2 BUDGET_S=1800 \
#     bash bench/agentic_gpu.sh train
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD PHASE=${1:-}
shift || true
WORK=${WORK:-/tmp/agentic_gpu} OUT=${OUT:-/tmp/agentic_gpu_out}
SFT_STEPS=${SFT_STEPS:-60} SFT_BUDGET_S=${SFT_BUDGET_S:-240} STEPS=${STEPS:-4} BATCH=${BATCH:-4} N=${N:-4}
VAL_N=${VAL_N:-4} MAX_TURNS=${MAX_TURNS:-16} BUDGET_S=${BUDGET_S:-570} PARALLEL=${PARALLEL:-12} PORT=${PORT:-8766}
DEVICE=${DEVICE:-cuda} SCRIPTS=${SCRIPTS:-} MODEL=${MODEL:-} TOKENIZER=${TOKENIZER:-.stage/tok}
DATA=${DATA:-} SEED=${SEED:-0} VAL_TRAIN=${VAL_TRAIN:-1} PROBE_OTHER=${PROBE_OTHER:-} VAL=${VAL:-1}
CRITIC_STEPS=${CRITIC_STEPS:-4} CRITIC_BUDGET_S=${CRITIC_BUDGET_S:-240} CRITIC_LR=${CRITIC_LR:-1e-4}
ACTOR_LR=${ACTOR_LR:-1e-5} PPO_EPOCHS=${PPO_EPOCHS:-2} TEMPERATURE=${TEMPERATURE:-0.7} SFT_LR=${SFT_LR:-1e-4}
RES=$WORK/results START=$(date +%s)
FOLLOW_S=${FOLLOW_S:-570} DETACH=${DETACH:-0}
case $PHASE in here | data | put | train | ppo | more | follow) ;; *)
  echo "usage: bash bench/agentic_gpu.sh here | data | put K... | train | ppo | more | follow" >&2; exit 2 ;;
esac

if [ "$PHASE" = here ]; then
  set -e
  bash scripts/device_wheels.sh rl --no-data
  CHUNK_MIB=16 bash scripts/stage_smollm2.sh split .stage
  python3 -m cuda_agent.agent.models.gguf .stage/tok --tokenizer-only
  du -sh .whl .stage/*
  exit 0
fi

mkdir -p "$OUT" "$RES"
elapsed() { echo $(( $(date +%s) - START )); }
pack() {  # the results so far, replaced whole (a kill during tar leaves the last complete one)
  tar -C "$RES" -cf "$OUT/agentic_gpu.tar.part" . 2>/dev/null
  [ $? -le 1 ] && mv -f "$OUT/agentic_gpu.tar.part" "$OUT/agentic_gpu.tar"
}

# DETACH=1: the phase runs on in a process session of its own, which the device machine keeps between calls while
# it stays warm, so that one verl run (its Ray start-up paid once) spans several calls; this call, then each
# `follow` call made at once after the one before, shows its new log lines and packs its results for FOLLOW_S.
if [ "$PHASE" = follow ] || [ "$DETACH" = 1 ]; then
  if [ "$PHASE" != follow ]; then
    if [ -f "$WORK/detached.pid" ] && kill -0 "$(cat "$WORK/detached.pid")" 2>/dev/null; then
      echo "== a detached run is still going: bash bench/agentic_gpu.sh follow"; exit 2
    fi
    : > "$WORK/detached.log"
    echo 0 > "$WORK/detached.shown"
    DETACH=0 OUT=$WORK/detached_out setsid nohup bash "$ROOT/bench/agentic_gpu.sh" "$PHASE" "$@" \
      > "$WORK/detached.log" 2>&1 < /dev/null &
    echo $! > "$WORK/detached.pid"
  fi
  [ -f "$WORK/detached.pid" ] || { echo "== no detached run in $WORK: start one with DETACH=1"; exit 2; }
  PID=$(cat "$WORK/detached.pid") END=$(( START + FOLLOW_S ))
  show() {  # the log lines not shown by this or an earlier call
    local shown total
    shown=$(cat "$WORK/detached.shown" 2>/dev/null || echo 0) total=$(wc -l < "$WORK/detached.log")
    [ "$total" -gt "$shown" ] && sed -n "$((shown + 1)),${total}p" "$WORK/detached.log" | cut -c1-400
    echo "$total" > "$WORK/detached.shown"
  }
  TICK=0
  while kill -0 "$PID" 2>/dev/null && [ "$(date +%s)" -lt "$END" ]; do
    sleep 1; TICK=$(( TICK + 1 )); [ $(( TICK % 30 )) -eq 0 ] && { show; pack; }
  done
  show; pack
  if kill -0 "$PID" 2>/dev/null; then
    echo "== still running at $(elapsed) s of this call: call 'bash bench/agentic_gpu.sh follow' at once (the machine goes back after ~30 s idle)"
    exit 0
  fi
  ENDED=$(grep -o '^== [a-z]*: exit [0-9]*' "$WORK/detached.log" | tail -n 1)
  echo "== the detached run ended (${ENDED#== }); its results are in this call's agentic_gpu.tar"
  RC=${ENDED##* }
  exit "${RC:-1}"
fi
exec > >(tee -a "$RES/agentic_gpu.log") 2>&1
GROUP="" SERVE=""
stop_group() {  # a process started with setsid: its group, TERM then KILL
  kill -TERM -- -"$1" 2>/dev/null
  for _ in $(seq 20); do kill -0 -- -"$1" 2>/dev/null || break; sleep 1; done
  kill -KILL -- -"$1" 2>/dev/null; return 0
}
on_exit() {
  local rc=$?
  [ -n "$GROUP" ] && stop_group "$GROUP"
  [ -n "$SERVE" ] && kill "$SERVE" 2>/dev/null
  echo "== $PHASE: exit $rc at $(elapsed) s; results in $OUT/agentic_gpu.tar"
  pack
}
trap on_exit EXIT
trap 'echo "== signalled at $(elapsed) s"; exit 143' TERM INT HUP
watch() {  # watch DEADLINE LOG CMD...: CMD in a process group of its own, output to LOG, packing every 30 s,
  # stopped at DEADLINE (epoch s)
  local deadline=$1 log=$2 tick=0; shift 2
  setsid "$@" > "$log" 2>&1 &
  GROUP=$!
  while kill -0 "$GROUP" 2>/dev/null; do
    sleep 2; tick=$(( tick + 2 ))
    if [ "$(date +%s)" -gt "$deadline" ]; then echo "== stopped at its deadline, $(elapsed) s"; stop_group "$GROUP"; break; fi
    [ $(( tick % 30 )) -eq 0 ] && { echo "== $(elapsed) s: $(tail -n 1 "$log" 2>/dev/null | cut -c1-200)"; pack; }
  done
  wait "$GROUP" 2>/dev/null; local rc=$?; GROUP=""; return $rc
}

if [ "$DEVICE" = cuda ]; then  # the GPU image's missing wheels (scripts/device_wheels.sh), installed by the first call
  . bench/site_wheels.sh && install_wheels || exit 1
  [ -f /tmp/site/.wheels ] || { echo "== no wheels in /tmp/site: carry .whl"; exit 2; }
  chmod -R a+rX /tmp/site  # the candidates' processes run under ids of their own and import from here too
  export PYTHONPATH=/tmp/site:$ROOT PATH=/tmp/site/bin:$PATH
else
  export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
fi
export TORCH_CUDA_ARCH_LIST=9.0 RAY_DEDUP_LOGS=0 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
CLI="python3 -m cuda_agent"
echo "== $(date -u +%FT%TZ) $PHASE $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null)"

case $PHASE in
data)
  watch $(( START + BUDGET_S )) "$RES/data.log" $CLI train agentic --model "$TOKENIZER" --device "$DEVICE" \
    --out "$WORK/data" --parallel "$PARALLEL" ${SCRIPTS:+--scripts "$SCRIPTS"}
  rc=$?
  cp "$WORK/data/agentic.json" "$RES/" 2>/dev/null
  tail -n 3 "$RES/data.log"
  # the data themselves (a few MB): a later session carries them (.carry/agentic_data) instead of this call
  tar -C "$WORK/data" -cf "$OUT/agentic_data.tar" sft.parquet rl.parquet heldout.parquet agentic.json 2>/dev/null
  python3 - "$WORK/data/agentic.json" <<'PY' || exit 1
import json, sys
from collections import Counter
episodes = json.load(open(sys.argv[1]))["episodes"]
print(f"== {len(episodes)} scripted episodes: " + ", ".join(f"{k} {v}" for k, v in sorted(Counter(
    (e["script"], e["verdict"], e["reward"]) for e in episodes).items())))
PY
  exit $rc
  ;;
put)
  for k in "$@"; do bash scripts/stage_smollm2.sh put ".stage/$k" || exit 1; done
  exit 0
  ;;
esac

# train / ppo / more: the model, SFT and the critic (train), then PPO judged by a `cuda-agent serve` on this GPU.
if [ ! -f "$WORK/data/sft.parquet" ] && [ -n "$DATA" ]; then mkdir -p "$WORK/data" && tar -xf "$DATA" -C "$WORK/data"; fi
[ -f "$WORK/data/sft.parquet" ] || { echo "== no $WORK/data/sft.parquet: run the data call first, or set DATA=TAR"; exit 2; }
if [ "$DEVICE" = cuda ]; then  # one sequence a micro-batch, activations recomputed: an episode's 8k tokens make
  # 1.6 GB of fp32 logits each, and the actor, its reference, the critic and the rollout share the card
  SFT_KNOBS=() PPO_KNOBS=(--set actor_rollout_ref.rollout.agent.num_workers=4
    --set actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 --set critic.ppo_micro_batch_size_per_gpu=1
    --set actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1
    --set actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1
    --set actor_rollout_ref.model.enable_gradient_checkpointing=true --set critic.model.enable_gradient_checkpointing=true)
else  # verl on our CPU platform (bench/agentic_ppo_cpu.sh's settings): short replies, small micro-batches
  SFT_KNOBS=(--set trainer.device=cpu --set engine.strategy=fsdp2 --set engine.dtype=float32
    --set data.train_batch_size=2 --set data.micro_batch_size_per_gpu=2)
  PPO_KNOBS=(--set trainer.device=cpu --set data.max_response_length=1024
    --set actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 --set critic.ppo_micro_batch_size_per_gpu=2
    --set actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2
    --set actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2 --set actor_rollout_ref.rollout.agent.num_workers=1
    --set actor_rollout_ref.model.enable_gradient_checkpointing=false --set critic.model.enable_gradient_checkpointing=false)
fi
PPO_KNOBS+=(--set "+actor_rollout_ref.rollout.engine_kwargs.hf.decode=${DECODE:-eager}")
if [ "$PHASE" = train ]; then
  if [ -z "$MODEL" ] && [ "$DEVICE" = cuda ]; then
    for k in .stage/[0-9]*; do bash scripts/stage_smollm2.sh put "$k" || exit 1; done  # the chunks this call carries
    MODEL=/tmp/smollm2
  elif [ -z "$MODEL" ]; then  # the CPU's stand-in: a tiny random Llama in SmolLM2's tokens
    python3 bench/tiny_llama.py "$TOKENIZER" "$WORK/tiny" || exit 1
    MODEL=$WORK/tiny
  fi
  [ -f "$MODEL/config.json" ] || { echo "== no model at $MODEL: stage SmolLM2 (.stage chunks) or set MODEL=DIR"; exit 2; }
  mkdir -p "$RES/sft"
  watch $(( $(date +%s) + SFT_BUDGET_S )) "$RES/sft/train.log" $CLI train rft --config recipes/agentic_curriculum_sft.yaml \
    --out "$RES/sft" --set model.path="$MODEL" --set data.train_files="$WORK/data/sft.parquet" \
    --set trainer.total_training_steps="$SFT_STEPS" --set trainer.save_freq="$SFT_STEPS" --set optim.lr="$SFT_LR" \
    --set trainer.default_local_dir="$WORK/sft" --set +model.override_config.attn_implementation=sdpa \
    --set model.use_remove_padding=false "${SFT_KNOBS[@]}"
  echo "== SFT exit $? at $(elapsed) s; $(cat "$RES"/sft/metrics.*.jsonl 2>/dev/null | grep -c '"step"') steps"
  tail -n 3 "$RES/sft/train.log"
  SFT_HF=$(python3 -c "import sys; from cuda_agent.rl.launch import latest_checkpoint as last; p = last(sys.argv[1]); print(p / 'huggingface' if p else '')" "$WORK/sft")
  [ -n "$SFT_HF" ] || { echo "== no complete SFT checkpoint: no PPO"; exit 1; }
  # What the SFT'd model does on the first turn of its own episodes (greedy, as the rollout engine generates), and,
  # with PROBE_OTHER=TAR, under that data's prompts: seconds, printed before PPO is paid for.
  OTHER=()
  if [ -n "$PROBE_OTHER" ]; then
    mkdir -p "$WORK/probe_other" && tar -xf "$PROBE_OTHER" -C "$WORK/probe_other" sft.parquet && OTHER=(--other "$WORK/probe_other/sft.parquet")
  fi
  python3 bench/sft_probe.py "$SFT_HF" "$WORK/data/sft.parquet" "${OTHER[@]}" --device "$DEVICE" --out "$RES/sft/probe.json" \
    > "$RES/sft/probe.log" 2>&1 || { echo "== SFT probe failed (the run goes on):"; tail -n 5 "$RES/sft/probe.log"; }
  grep '^== SFT probe' "$RES/sft/probe.log"
  python3 -m cuda_agent.rl.critic_model "$SFT_HF" "$WORK/critic" || exit 1
  echo "$SFT_HF" > "$WORK/sft_model"
  echo "$WORK/critic" > "$WORK/critic_model"
  pack
  if [ "$CRITIC_STEPS" -gt 0 ]; then  # the paper's stage 3: the critic learns the scripted episodes' returns first
    $CLI train critic-data --from-sft "$WORK/data/sft.parquet" --out "$WORK/critic_data/replay.parquet" || exit 1
    ROWS=$(python3 -c "import sys, pyarrow.parquet as pq; print(pq.read_metadata(sys.argv[1]).num_rows)" \
      "$WORK/critic_data/replay.parquet")
    WARM_BATCH=$(( BATCH * N < ROWS ? BATCH * N : ROWS ))  # a PPO step's episodes, or every episode there is
    rm -rf "$WORK/critic_ckpt" "$WORK/critic_warm" "$RES/critic"
    mkdir -p "$RES/critic"
    watch $(( $(date +%s) + CRITIC_BUDGET_S )) "$RES/critic/train.log" $CLI train critic-warmup \
      --config recipes/agentic_critic_warmup.yaml --out "$RES/critic" --set actor_rollout_ref.model.path="$SFT_HF" \
      --set critic.model.path="$WORK/critic" --set data.train_files="$WORK/critic_data/replay.parquet" \
      --set data.val_files="$WORK/critic_data/replay.parquet" --set data.train_batch_size="$WARM_BATCH" \
      --set actor_rollout_ref.actor.ppo_mini_batch_size="$WARM_BATCH" \
      --set actor_rollout_ref.actor.ppo_epochs="$PPO_EPOCHS" --set trainer.total_training_steps="$CRITIC_STEPS" \
      --set critic.optim.lr="$CRITIC_LR" \
      --set trainer.default_local_dir="$WORK/critic_ckpt" --set actor_rollout_ref.actor.strategy=fsdp2 \
      --set critic.strategy=fsdp2 --set +actor_rollout_ref.model.override_config.attn_implementation=sdpa \
      --set "+actor_rollout_ref.actor.fsdp_config.mixed_precision={param_dtype:fp32,reduce_dtype:fp32,buffer_dtype:fp32}" \
      --set actor_rollout_ref.rollout.dtype=float32 --set actor_rollout_ref.model.use_remove_padding=false \
      --set critic.model.use_remove_padding=false --set actor_rollout_ref.actor.fsdp_config.use_torch_compile=false \
      --set critic.fsdp.use_torch_compile=false --set +ray_kwargs.ray_init.include_dashboard=false "${PPO_KNOBS[@]}"
    echo "== critic warm-up exit $? at $(elapsed) s"
    [ "$DEVICE" = cuda ] && ray stop --force > /dev/null 2>&1  # a warm-up cut by its box leaves Ray's daemons
    $CLI train report "$RES/critic" > /dev/null 2>&1
    # Its last whole step's critic as a folder PPO loads (verl's model merger; the critic's class copied beside it).
    python3 - "$WORK" "$RES/critic/steps.jsonl" <<'PY' || { echo "== no complete critic warm-up step: no PPO (CRITIC_STEPS=0 skips it)"; exit 1; }
import json, sys
from pathlib import Path
from safetensors.torch import load_file
from cuda_agent.rl.pipeline import hf_folder
work, steps = Path(sys.argv[1]), Path(sys.argv[2])
warm = hf_folder(work / "critic_ckpt", "critic", work / "critic_warm", str(work / "critic"))
losses = [(s["step"], s["critic_loss"]) for s in map(json.loads, steps.read_text().splitlines()) if s["step"] > 0]
print("== critic warm-up value loss by step: " + ", ".join(f"{n}: {loss:.4g}" for n, loss in losses if loss is not None))
before, after = load_file(work / "critic" / "model.safetensors"), load_file(warm / "model.safetensors")
both = sorted(before.keys() & after.keys())
moved = max((after[k].float() - before[k].float()).abs().max().item() for k in both)
print(f"== the warmed critic against the fresh one: max |difference| {moved:g} over {len(both)} tensors")
(work / "critic_model").write_text(f"{warm}\n")
PY
  fi
  pack
fi
[ -f "$WORK/sft_model" ] || { echo "== no SFT model in $WORK: run the train call first"; exit 2; }
SFT_HF=$(cat "$WORK/sft_model") RUN=$RES/ppo_s$SEED CRITIC=$(cat "$WORK/critic_model" 2>/dev/null || echo "$WORK/critic")
echo "== PPO's critic: $CRITIC"
$CLI serve --port "$PORT" --workspace-root "$WORK" > "$RES/serve.log" 2>&1 &
SERVE=$!
python3 - "$WORK" "http://127.0.0.1:$PORT" "$MAX_TURNS" "$DEVICE" "$SEED" <<'PY' || exit 1
import sys, yaml
import pyarrow as pa, pyarrow.parquet as pq
work, url, turns, device, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
recipe = yaml.safe_load(open("recipes/agentic_curriculum_ppo.yaml"))
# The paper's split: the agent loop's tools and final judgement go to the service, not to a pool in the trainer.
recipe["agent_loop"].update(work_dir=f"{work}/rollouts_s{seed}", sandbox_url=url, share_training_gpus=False,
                            max_turns=turns, save_tokens=False, device=device)
yaml.safe_dump(recipe, open(f"{work}/ppo_recipe_s{seed}.yaml", "w"))
# The validation rows with a data source per split, so that verl's own val-core/<source>/ metrics keep them apart.
for name, source in (("heldout", "agentic/held_out"), ("rl", "agentic/train")):
    table = pq.read_table(f"{work}/data/{name}.parquet")
    column = pa.array([source] * table.num_rows, pa.string())
    pq.write_table(table.set_column(table.schema.get_field_index("data_source"), "data_source", column),
                   f"{work}/data/val_{name}.parquet")
PY
VAL_FILES=$WORK/data/val_heldout.parquet
[ "$VAL_TRAIN" = 1 ] && VAL_FILES="$VAL_FILES,$WORK/data/val_rl.parquet"
mkdir -p "$RUN"
# The held-out tasks before the first PPO step, whichever call makes it (a call cut before its first checkpoint
# leaves the next one to measure them).
VAL_BEFORE=$(python3 -c "import sys; from cuda_agent.rl.launch import latest_checkpoint as last; print('false' if last(sys.argv[1]) else 'true')" "$WORK/ppo_ckpt_s$SEED")
TEST_FREQ=$STEPS
[ "$VAL" = 0 ] && VAL_BEFORE=false TEST_FREQ=-1  # no validation: the training steps' own rollouts are the record
# A seed's later call continues the run its checkpoints hold (without --resume the launcher refuses a folder with
# checkpoints).
watch $(( START + BUDGET_S )) "$RUN/train.log" $CLI train agentic-ppo --config "$WORK/ppo_recipe_s$SEED.yaml" --out "$RUN" \
  $([ "$VAL_BEFORE" = false ] && echo --resume) \
  --set actor_rollout_ref.model.path="$SFT_HF" --set critic.model.path="$CRITIC" \
  --set actor_rollout_ref.actor.optim.lr="$ACTOR_LR" --set actor_rollout_ref.actor.ppo_epochs="$PPO_EPOCHS" \
  --set data.train_files="$WORK/data/rl.parquet" --set "data.val_files=[$VAL_FILES]" \
  --set data.seed="$SEED" --set actor_rollout_ref.rollout.seed="$SEED" \
  --set trainer.validation_data_dir="$RUN/validation_data" --set trainer.rollout_data_dir="$RUN/rollout_data" \
  --set data.train_batch_size="$BATCH" --set actor_rollout_ref.rollout.n="$N" \
  --set actor_rollout_ref.actor.ppo_mini_batch_size="$BATCH" --set data.val_batch_size=4 \
  --set actor_rollout_ref.rollout.multi_turn.max_assistant_turns="$MAX_TURNS" \
  --set actor_rollout_ref.rollout.val_kwargs.n="$VAL_N" --set actor_rollout_ref.rollout.val_kwargs.do_sample=true \
  --set actor_rollout_ref.rollout.val_kwargs.temperature="$TEMPERATURE" --set actor_rollout_ref.rollout.temperature="$TEMPERATURE" \
  --set trainer.total_training_steps="$STEPS" --set trainer.test_freq="$TEST_FREQ" --set trainer.save_freq=1 \
  --set trainer.default_local_dir="$WORK/ppo_ckpt_s$SEED" --set trainer.resume_mode=auto \
  --set trainer.val_before_train="$VAL_BEFORE" \
  --set actor_rollout_ref.actor.strategy=fsdp2 --set critic.strategy=fsdp2 \
  --set +actor_rollout_ref.model.override_config.attn_implementation=sdpa \
  --set "+actor_rollout_ref.actor.fsdp_config.mixed_precision={param_dtype:fp32,reduce_dtype:fp32,buffer_dtype:fp32}" \
  --set actor_rollout_ref.rollout.dtype=float32 \
  --set actor_rollout_ref.model.use_remove_padding=false --set critic.model.use_remove_padding=false \
  --set actor_rollout_ref.actor.fsdp_config.use_torch_compile=false \
  --set actor_rollout_ref.ref.fsdp_config.use_torch_compile=false --set critic.fsdp.use_torch_compile=false \
  --set +ray_kwargs.ray_init.include_dashboard=false "${PPO_KNOBS[@]}"
PPO_RC=$?
echo "== PPO exit $PPO_RC at $(elapsed) s"
tail -n 5 "$RUN/train.log"
[ "$DEVICE" = cuda ] && ray stop --force > /dev/null 2>&1  # elsewhere other Ray clusters may run
$CLI train report "$RES"/ppo_s* --out "$RES/report"
exit $PPO_RC  # the call failed when PPO did, whatever the report of the seeds so far
