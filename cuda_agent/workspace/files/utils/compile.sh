#!/usr/bin/env bash
# Build kernels/ into the cuda_extension module, recompiling only what changed (read-only file).
cd "$(dirname "$0")/.." && exec "${CUDA_AGENT_PYTHON:-python}" -m utils.compile "$@"
