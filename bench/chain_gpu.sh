#!/usr/bin/env bash
# All four training stages chained once on one H200 (issue 21): `cuda-agent train all` with a tiny model, each
# stage's artifact feeding the next, judged by a `cuda-agent serve` on the same GPU. Short stages (STEPS each):
#   single-turn PPO on the curriculum prompt (recipes/curriculum_ppo.yaml) -> collect (agent loop, examples, TURNS
#   turns) -> rft-data (the kept trajectories plus the curriculum's SFT rows: a tiny model's agent episodes pass
#   nothing) -> rft (verl's SFT trainer) -> critic-data -> critic-warmup (replay, actor frozen) -> agentic PPO.
# It then checks that the critic warm-up left the actor as RFT made it, and runs `train all` once more: every stage
# is skipped (the manifest says done). Results (manifest.json, each stage's steps.jsonl/report.html/metrics, the
# logs) land in $OUT/chain_gpu.tar.
#
# Knobs (env): STEPS=2 TURNS=2 SFT_STEPS=20 ACTOR=<HF folder> (default: a tiny random Qwen2), BUDGET_S=540
# RAY_STOP=0: other Ray clusters run beside this script's (bench/learning_gpu.sh in the same call: its header):
# no `ray stop --force` on the GPU, which would stop theirs too. AFTER="FILE ..." (AFTER_S=240): `train all` waits
# until these exist, e.g. the learning run's judge_*.json, so that its curriculum is timed before our GPU work.
# DEVICE=cuda (default) or cpu: on the CPU, verl runs on our CPU platform (trainer.device=cpu, cuda_agent.rl.verl_cpu;
# the SFT step through cuda_agent.rl.sft_cpu), sized as bench/learning_gpu.sh's CPU mode (fsdp2 in fp32, sdpa, no
# remove-padding, no gradient checkpointing, no Ray dashboard), the curriculum and the tasks are the CPU ones, the
# judge times on the CPU. CPU run of 2026-12-05 (bench/results/cpu-2026-12-05-chain/, 2 shared cores, venv active):
# the 7 stages in 332 s (single-turn 68, collect 56, rft 10, critic-warmup 79, agentic PPO 106), the warm-up's actor
# equal to RFT's, the re-run skipping all; no learning (a random model, 2 steps a stage):
#   DEVICE=cpu STEPS=2 TURNS=2 SFT_STEPS=4 BUDGET_S=2400 OUT=/tmp/chain_cpu_out WORK=/tmp/chain_cpu PY=python \
#     bash bench/chain_gpu.sh
# H200 run of 2026-12-06 (bench/results/h200-2026-12-06/chain/, beside bench/learning_gpu.sh in one call, then
# carried on): single-turn 133 s, collect 112, rft 92, critic-warmup 108, agentic PPO cut by the call and resumed
# in the next (131 s); the warm-up's actor equal to RFT's, the re-run skipping all.
# Here: bash scripts/device_wheels.sh rl --no-data ; carry [".whl"]
# There (repository root): bash bench/chain_gpu.sh
# Across calls: each verl launch starts in ~100-150 s on a GPU machine, so the chain may outlast one call. Every
# exit also packs $OUT/chain_state.tar: the run folder, the tiny models, the data and the pipeline file, without
# what no stage still to run reads (bench/chain_state.py: finished stages' checkpoints, artifacts whose readers are
# done; ~7-9 MB where it was 22 MB, since the tree and the wheels leave ~10 MB of the 64 MiB a call carries). The
# next call carries on where `train all` stopped (the manifest: done stages are skipped, a started one resumes):
#   here: rm -rf .carry/chain && mkdir -p .carry/chain && cp FILES_AT/chain_state.tar .carry/chain/
#   carry [".whl", ".carry/chain"]: STATE=.carry/chain/chain_state.tar bash bench/chain_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
STEPS=${STEPS:-2} TURNS=${TURNS:-2} SFT_STEPS=${SFT_STEPS:-20} BUDGET_S=${BUDGET_S:-540} PORT=${PORT:-8766} RAY_STOP=${RAY_STOP:-1}
DEVICE=${DEVICE:-cuda}
OUT=${OUT:-/tmp/chain_gpu_out} STATE=${STATE:-}
START=$(date +%s)
if [ -n "$STATE" ]; then
  [ -f "$STATE" ] || { echo "STATE=$STATE: no such file (the chain_state.tar of an earlier call)"; exit 2; }
  STATE=$(realpath "$STATE")
fi
. bench/work_dir.sh && WORK=$(work_dir chain_gpu) || exit 1  # WORK=DIR: there, emptied; else a new mktemp folder
mkdir -p "$OUT"
[ -z "$STATE" ] || tar -xf "$STATE" -C "$WORK" || exit 1  # the paths in its manifest and pipeline file are $WORK's
exec > >(tee -a "$WORK/chain_gpu.log") 2>&1
pack() {  # on every exit, also when the device call's limit cuts the run: what ran so far comes back
  find "$WORK/run" -maxdepth 2 \( -name 'steps.jsonl' -o -name 'report.html' -o -name 'manifest.json' -o -name 'metrics.*.jsonl' \) \
    -print0 2>/dev/null | tar -cf "$OUT/chain_gpu.tar" --null -T - "$WORK/chain_gpu.log" "$WORK/train_all.log" "$WORK/pipeline.yaml" \
    "$WORK/serve.log" 2>/dev/null
  # The state for a next call, without what no stage still to run reads (bench/chain_state.py: finished stages'
  # checkpoints, artifacts whose readers are done), so that it travels beside the tree and the wheels.
  local skip
  skip=$(python3 "$ROOT/bench/chain_state.py" "$WORK" 2>/dev/null)
  # shellcheck disable=SC2086  # one word per --exclude
  ( cd "$WORK" && tar -cf "$OUT/chain_state.tar.part" $skip ./tiny ./curriculum ./examples.parquet ./*.yaml ./run \
    ./chain_gpu.log ./train_all.log 2>/dev/null; [ $? -le 1 ] ) && mv -f "$OUT/chain_state.tar.part" "$OUT/chain_state.tar"
}
trap pack EXIT
if [ "$DEVICE" = cuda ] && ls .whl/*.whl >/dev/null 2>&1; then  # the H200's wheels; elsewhere the venv has them
  . bench/site_wheels.sh && install_wheels
  export PYTHONPATH=/tmp/site:$ROOT PATH=/tmp/site/bin:$PATH
else
  export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
fi
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} RAY_DEDUP_LOGS=0 TOKENIZERS_PARALLELISM=false
PY=${PY:-python3}
echo "== $(date -u +%FT%TZ) $(hostname) device=$DEVICE steps=$STEPS turns=$TURNS sft_steps=$SFT_STEPS"
[ "$DEVICE" = cuda ] && nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader

$PY -m cuda_agent serve --port "$PORT" --workspace-root "$WORK" > "$WORK/serve.log" 2>&1 &
SERVE=$!
if [ -n "$STATE" ]; then
  echo "== carrying on $STATE: $(grep -c '"done"' "$WORK/run/manifest.json" 2>/dev/null || echo 0) stage(s) done"
  sleep 5  # serve's start
else
$PY bench/tiny_model.py --out "$WORK/tiny" > /dev/null || exit 1
ACTOR=${ACTOR:-$WORK/tiny/actor}
$PY -m cuda_agent train curriculum --device "$DEVICE" --out "$WORK/curriculum" > /dev/null || exit 1
$PY -m cuda_agent train data --suite examples --device "$DEVICE" --out "$WORK/examples.parquet" || exit 1
sleep 2

# The pipeline file: the recipes with the judge service and one GPU, and the tiny model's sizes.
$PY - "$WORK" "$ACTOR" "http://127.0.0.1:$PORT" "$STEPS" "$TURNS" "$SFT_STEPS" "$DEVICE" <<'PY' || exit 1
import sys, yaml
work, actor, url, steps, turns, sft_steps, device = sys.argv[1:]
critic = f"{work}/tiny/critic"

def recipe(name, **fields):
    data = yaml.safe_load(open(f"recipes/{name}.yaml"))
    for key, values in fields.items():
        data[key] = {**(data.get(key) or {}), **values}
    path = f"{work}/{name}.yaml"
    yaml.safe_dump(data, open(path, "w"))
    return path

judged = {"device": device, "sandbox_url": url}
gpu = [  # what verl needs on one GPU: fsdp2 in fp32, sdpa (no flash-attn), our transformers rollout
    f"trainer.device={device}", "trainer.n_gpus_per_node=1", f"trainer.total_training_steps={steps}",
    f"trainer.save_freq={steps}", "trainer.test_freq=-1", "trainer.logger=[console,file]",
    "actor_rollout_ref.actor.strategy=fsdp2", "critic.strategy=fsdp2", "critic.model.trust_remote_code=true",
    "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
    "+actor_rollout_ref.actor.fsdp_config.mixed_precision={param_dtype:fp32,reduce_dtype:fp32,buffer_dtype:fp32}",
    "actor_rollout_ref.rollout.name=hf", "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
    "actor_rollout_ref.rollout.dtype=float32", "actor_rollout_ref.rollout.calculate_log_probs=true",
    "actor_rollout_ref.rollout.agent.num_workers=2", "+ray_kwargs.ray_init.namespace=cuda-agent",
    "actor_rollout_ref.actor.ulysses_sequence_parallel_size=1", "critic.ulysses_sequence_parallel_size=1",
    # verl's torch.compile only costs a tiny model time: ~30 s of inductor in each launch's first step on the H200
    # (bench/results/h200-2026-12-05-b/README.md), and this chain launches verl five times.
    "actor_rollout_ref.actor.fsdp_config.use_torch_compile=false",
    "actor_rollout_ref.ref.fsdp_config.use_torch_compile=false", "critic.fsdp.use_torch_compile=false",
    # 2: agentic PPO's batch is 2 episodes, and verl asserts that a batch divides into micro-batches
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2", "critic.ppo_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
    "data.max_prompt_length=4096", "data.max_response_length=512",
    "actor_rollout_ref.actor.checkpoint.save_contents=[model,optimizer,extra,hf_model]",  # the HF hand-off
    # No hf_model for the critic: verl 0.9.1 cannot write one for a trust_remote_code model under FSDP2 (with no auto
    # class a None auto_map key fails the config's json; with one, auto_map names FSDP2's class in torch's
    # _fsdp_init.py); the pipeline's hf_folder then runs verl's model merger and copies the critic's code beside it.
    f"actor_rollout_ref.rollout.multi_turn.max_assistant_turns={turns}",
]
sft = ["engine.use_torch_compile=false"]
single = ["data.max_prompt_length=2048", "data.max_response_length=1024"]  # the recipe's: the CUDA curriculum
if device == "cpu":  # as bench/learning_gpu.sh DEVICE=cpu (bench/results/cpu-2026-12-05-learning/, "Where the time went")
    # No remove-padding (sdpa over one packed sequence costs more than padded rows), no gradient checkpointing,
    # no dashboard; the examples' agent prompts are ~2,100 tokens, the CPU curriculum's 86 (answers ~310).
    gpu = [s for s in gpu if not s.startswith("data.max_response_length")] + [
        "data.max_response_length=256", "+ray_kwargs.ray_init.include_dashboard=false",
        "actor_rollout_ref.model.use_remove_padding=false", "critic.model.use_remove_padding=false",
        "actor_rollout_ref.model.enable_gradient_checkpointing=false",
        "critic.model.enable_gradient_checkpointing=false"]
    single = ["data.max_prompt_length=128", "data.max_response_length=448"]
    sft = [*sft, "trainer.device=cpu", "engine.strategy=fsdp2", "engine.dtype=float32",
           "model.enable_gradient_checkpointing=false", "data.num_workers=0", "data.micro_batch_size_per_gpu=4",
           "data.max_length=1024"]
examples = [f"data.train_files={work}/examples.parquet", f"data.val_files={work}/examples.parquet"]
# train_batch_size also for collect: verl builds its train loader even when val_only (1,024 rows > the 6 tasks).
small = ["data.train_batch_size=2", "actor_rollout_ref.actor.ppo_mini_batch_size=2", "data.val_batch_size=2"]
stages = {
    "single-turn": {"recipe": recipe("curriculum_ppo", reward_function=judged), "set": [
        *[s for s in gpu if not s.startswith("data.max_")], *single, f"actor_rollout_ref.model.path={actor}",
        f"critic.model.path={critic}", "actor_rollout_ref.rollout.n=4", "trainer.val_before_train=false",
        f"data.train_files={work}/curriculum/rl.parquet", f"data.val_files={work}/curriculum/rl.parquet"]},
    "collect": {"recipe": recipe("collect", agent_loop=judged), "set": [
        *gpu, *small, *examples, "data.val_max_samples=2", "actor_rollout_ref.rollout.val_kwargs.n=2"]},
    "rft-data": {"extra_sft": [f"{work}/curriculum/sft.parquet"]},
    "rft": {"recipe": recipe("curriculum_sft"), "set": [
        f"trainer.total_training_steps={sft_steps}", f"trainer.save_freq={sft_steps}", "data.truncation=right",
        "data.train_batch_size=8", "checkpoint.save_contents=[model,optimizer,extra,hf_model]",
        "+model.override_config.attn_implementation=sdpa", "model.use_remove_padding=false", *sft]},
    "critic-warmup": {"set": [*gpu, *small, f"critic.model.path={critic}", "data.train_batch_size=4",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4", "trainer.val_before_train=false"]},
    "agentic-ppo": {"recipe": recipe("agentic_ppo", agent_loop=judged), "set": [
        *gpu, *small, *examples, "trainer.val_before_train=false"]},
}
yaml.safe_dump({"run_dir": f"{work}/run", "stages": stages}, open(f"{work}/pipeline.yaml", "w"), sort_keys=False)
PY
fi

descendants() { local p; for p in $(pgrep -P "$1" 2>/dev/null); do echo "$p"; descendants "$p"; done; }
if [ -n "${AFTER:-}" ]; then  # beside the learning run: its curriculum's verdicts are timed before our GPU work
  echo "== waiting (at most ${AFTER_S:-240} s) for $AFTER"
  for _ in $(seq "$(( ${AFTER_S:-240} / 2 ))"); do
    ready=1; for f in $AFTER; do [ -e "$f" ] || ready=0; done
    [ "$ready" = 1 ] && break; sleep 2
  done
  echo "== starting at $(( $(date +%s) - START )) s"
fi
setsid $PY -m cuda_agent train all --config "$WORK/pipeline.yaml" >> "$WORK/train_all.log" 2>&1 &  # a STATE's log goes on
PID=$!
while kill -0 "$PID" 2>/dev/null; do
  sleep 3
  [ $(( ($(date +%s) - START) % 30 )) -lt 3 ] && { echo "[$(( $(date +%s) - START )) s] $(grep -a '^== ' "$WORK/train_all.log" | tail -n 1)"; pack; }
  if [ $(( $(date +%s) - START )) -gt "$BUDGET_S" ]; then
    # Ray's daemons run in sessions of their own: the group and then every descendant listed before, by id.
    echo "== time budget of ${BUDGET_S}s spent"; pids=$(descendants "$PID"); kill -9 -- -"$PID" 2>/dev/null
    for p in $pids; do kill -9 "$p" 2>/dev/null; done; break
  fi
done
wait "$PID" 2>/dev/null; RC=$?; echo "== train all exit $RC at $(( $(date +%s) - START )) s"
grep -a "^== \|^   [a-z-]*: \|Error" "$WORK/train_all.log" | grep -v UserWarning | tail -n 40
if [ "$RC" -ne 0 ]; then  # cut by BUDGET_S or a failed stage: the checks below need the whole chain
  [ "$DEVICE" = cuda ] && [ "$RAY_STOP" = 1 ] && ray stop --force > /dev/null 2>&1
  kill "$SERVE" 2>/dev/null
  echo "== the chain did not finish: carry $OUT/chain_state.tar on (STATE=..., the header says how)"
  exit 3  # pack runs on exit
fi
# The warm-up's actor (its checkpoint's HF copy) against the RFT actor it started from: frozen means equal.
$PY - "$WORK/run" <<'PY'
import sys
from pathlib import Path
from safetensors.torch import load_file
from cuda_agent.rl.launch import latest_checkpoint
run = Path(sys.argv[1])
step = latest_checkpoint(run / "critic_warmup" / "checkpoints")  # verl's tracker: never a half-saved step
if step is None:
    sys.exit("== FAIL: the critic warm-up left no complete checkpoint to compare")
before = load_file(run / "rft" / "hf" / "model.safetensors")
last = load_file(step / "actor" / "huggingface" / "model.safetensors")
diff = max((before[k].float() - last[k].float()).abs().max().item() for k in before)
print(f"== critic-warmup's actor against the RFT actor: max |difference| {diff:g} over {len(before)} tensors")
if diff != 0:
    sys.exit("== FAIL: the critic warm-up changed the actor")
PY
FROZEN=$?
[ "$DEVICE" = cuda ] && [ "$RAY_STOP" = 1 ] && ray stop --force > /dev/null 2>&1  # elsewhere other Ray clusters may run: the group kill must do
echo "== again (every stage must be skipped):"
timeout 120 $PY -m cuda_agent train all --config "$WORK/pipeline.yaml" 2>&1 | tail -n 10
kill "$SERVE" 2>/dev/null
cat "$WORK/run/manifest.json"
pack; ls -la "$OUT/chain_gpu.tar"
[ "$FROZEN" -eq 0 ] || { echo "== the frozen-actor check failed (above)"; exit 1; }
