#!/usr/bin/env bash
# Where verl's SFT step goes for the tiny curriculum model on one GPU (issue 37: ~7 s a step on an H100 in
# bench/learning_gpu.sh, MFU 6e-5), and the agentic curriculum's CUDA kernels judged on the same card.
#
# Three SFT runs of recipes/curriculum_sft.yaml (tiny 2-layer hidden-128 model, 24 rows a step), one after the other:
#   A  the code at BASE (default: the checkout above this one, i.e. main when run from .wt-rl), alone;
#   B  this checkout (log-probs in blocks through model.external_lib: recipes.py; RFTDataset keeps rendered rows), alone;
#   C  this checkout again, while the agentic curriculum's CUDA kernels are judged beside it (nvcc builds on
#      every core, timing on the same GPU), as bench/learning_gpu.sh judges the curriculum while SFT trains;
#      with TOKENIZER=DIR (SmolLM2's tokenizer and config.json) scripted agentic episodes (PAIRS, task:script) run too.
# Per run: ticks.txt (a timestamp and the number of finished steps, every 0.5 s) and steps.txt (seconds per
# step from the ticks). C=0 skips run C (the kernels are then judged after B, alone); the judged kernels: judged/<device>_<task>_<kernel>.json; all in $OUT/sft_step.tar.
#   carry [".wt-rl"] (with .whl from scripts/device_wheels.sh rl --no-data copied into it), timeout 600:
#   cd .wt-rl && OUT=$OUT bash bench/sft_step_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD BASE=${BASE:-$(cd .. && pwd)}
OUT=${OUT:-/tmp/sft_step_out} WORK=${WORK:-/tmp/sft_step} STEPS=${STEPS:-12} TASKS=${TASKS:-"add_relu sigmoid row_max"}
PAIRS=${PAIRS:-"add_relu:fix_compile row_sum:fix_wrong sigmoid:unverified mul_add:fast"}
RES=$WORK/results  # packed into $OUT/sft_step.tar on exit (a call returns few files)
rm -rf "$WORK"; mkdir -p "$OUT" "$RES"
exec > >(tee -a "$RES/sft_step.log") 2>&1
trap 'tar -C "$RES" -cf "$OUT/sft_step.tar" . 2>/dev/null' EXIT
trap 'exit 143' TERM INT
. bench/site_wheels.sh && install_wheels
export PATH=/tmp/site/bin:$PATH TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH=/tmp/site:$ROOT
nvidia-smi --query-gpu=name --format=csv,noheader
python3 bench/tiny_model.py --out "$WORK/tiny" --hidden 128 --layers 2 > /dev/null || exit 1
python3 -m cuda_agent train curriculum --device cuda --out "$WORK/cur" --copies $(( (STEPS + 1) * 24 / 3 )) > /dev/null || exit 1

sft() {  # name, code root, steps: one SFT run, its finished steps sampled every 0.5 s
  local name=$1 code=$2 steps=$3 run=$RES/$1 pid start
  mkdir -p "$run"
  start=$(date +%s.%N)
  (cd "$code" && PYTHONPATH=/tmp/site:$code exec python3 -m cuda_agent train rft --config "$ROOT/recipes/curriculum_sft.yaml" \
    --out "$run" --set model.path="$WORK/tiny/actor" --set data.train_files="$WORK/cur/sft.parquet" \
    --set trainer.total_training_steps="$steps" --set trainer.default_local_dir="$WORK/ckpt_$name" \
    --set trainer.save_freq="$steps" --set +model.override_config.attn_implementation=sdpa \
    --set model.use_remove_padding=false --set data.train_batch_size=24 --set data.micro_batch_size_per_gpu=8) \
    > "$run/train.log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    echo "$(date +%s.%N) $(cat "$run"/metrics.*.jsonl 2>/dev/null | grep -c '"step"')" >> "$run/ticks.txt"
    sleep 0.5
  done
  wait "$pid"; echo "== $name exit $? after $(python3 -c "import time; print(round(time.time() - $start, 1))") s"
  python3 - "$run/ticks.txt" > "$run/steps.txt" <<'PY'
import sys
ticks = [(float(t), int(n)) for t, n in (line.split() for line in open(sys.argv[1]))]
first = {}
for t, n in ticks:
    first.setdefault(n, t)
steps = sorted(k for k in first if k > 0)
gaps = [first[b] - first[a] for a, b in zip(steps, steps[1:])]
print(f"first step done {first[steps[0]] - ticks[0][0]:.1f} s after launch" if steps else "no step finished")
if gaps:
    gaps_sorted = sorted(gaps)
    print(f"steps {len(steps)}; s per step: median {gaps_sorted[len(gaps) // 2]:.2f}, min {gaps_sorted[0]:.2f}, max {gaps_sorted[-1]:.2f}")
PY
  cat "$run/steps.txt"
}

judge_all() {  # the agentic kernels on CUDA, 4 at a time
  python3 - "$WORK/cand" $TASKS <<'PY'
import sys
from pathlib import Path
from cuda_agent.rl import agentic_curriculum as ac
from cuda_agent.rl.single_turn import write_candidate
out = Path(sys.argv[1])
for name in sys.argv[2:]:
    task = ac.task_named(name)
    (out / name).mkdir(parents=True, exist_ok=True)
    (out / name / "problem.py").write_text(ac.problem(task, "cuda").code)
    for kernel in ac.KERNELS:
        write_candidate({**ac.kernel_files(task, kernel, "cuda"), "model_new.py": ac.model_new(task)}, out / name / kernel)
PY
  mkdir -p "$RES/judged"
  for task in $TASKS; do for kernel in fast slow broken wrong; do echo "$task $kernel"; done; done |
    RES=$RES xargs -P 4 -L 1 bash -c 'python3 -m cuda_agent judge --device cuda --json "$0/$1/problem.py" "$0/$1/$2" \
      > "$RES/judged/cuda_$1_$2.json" 2> "$RES/judged/cuda_$1_$2.err"' "$WORK/cand"
  python3 - "$RES/judged" <<'PY'
import json, sys
from pathlib import Path
for f in sorted(Path(sys.argv[1]).glob("*.json")):
    try:
        v = json.loads(f.read_text())
    except ValueError:
        print(f.stem, "no verdict:", (f.with_suffix(".err")).read_text()[-300:]); continue
    t = v["timings_ms"]
    print(f.stem, v["verdict"], v["reward"], "ms", t["solution"], "eager", t["eager"], "compile", t["compile"])
PY
}

agentic() {  # scripted multi-turn episodes of the agentic curriculum on CUDA, SmolLM2's tokenizer (TOKENIZER=folder)
  [ -n "${TOKENIZER:-}" ] || return 0
  python3 - "$TOKENIZER" "$WORK/agentic" "$RES/agentic.json" "$PAIRS" <<'PY'
import json, sys, time
from pathlib import Path
import transformers
from cuda_agent.agent.models.gguf import chat_template_for_tools
from cuda_agent.rl import agentic_curriculum as ac
from cuda_agent.rl.agentic_sft import check_prompt_budget, play_scripts
tok = transformers.AutoTokenizer.from_pretrained(sys.argv[1])
chat_template_for_tools(tok)
print("first prompt", check_prompt_budget(tok, 2048, "cuda", True), "tokens (compact)")
pairs = [pair.split(":") for pair in sys.argv[4].split()]
start = time.time()
rows = play_scripts(tok, [(ac.task_named(t), s) for t, s in pairs], "cuda", Path(sys.argv[2]), parallel=len(pairs),
                    hf_model_type="llama")
out = [{k: r[k] for k in ("task", "script", "verdict", "reward", "turns")} | {"tokens": len(r["input_ids"]),
       "model_tokens": sum(r["loss_mask"])} for r in rows]
for row in out:
    print(row)
print(f"{len(rows)} episodes in {time.time() - start:.0f} s")
json.dump(out, open(sys.argv[3], "w"), indent=1)
PY
}

sft A "$BASE" "$STEPS"
sft B "$ROOT" "$STEPS"
if [ "${C:-1}" = 0 ]; then judge_all; exit 0; fi  # C=0: the kernels judged alone after A and B, no run C
judge_all > "$RES/judged.txt" 2>&1 &
JUDGE=$!
agentic > "$RES/agentic.txt" 2>&1 &
AGENTIC=$!
sft C "$ROOT" $(( STEPS * 2 ))
wait "$JUDGE"; cat "$RES/judged.txt"
wait "$AGENTIC"; cat "$RES/agentic.txt"
