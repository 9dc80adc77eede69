#!/usr/bin/env bash
# fp8jit cast on a lent Hopper machine: builds the CLI, then tests/gpu/cast_compare.py against
# DeepSeek-V3's fp8_cast_bf16.py (byte for byte, speed, FP8 round trip, host path = GPU path).
# Usage (repo root): bash tests/gpu/cast-on-gpu.sh      GIB=2 sets the checkpoint size; logs in $OUT.
# Needs .carry/deepseek-v3/inference with fp8_cast_bf16.py and kernel.py (lab/README.md).
set -uo pipefail
OUT=${OUT:-/tmp/fp8jit-cast-out}
mkdir -p "$OUT"
source tests/gpu/build-cli.sh cast
export FP8JIT_CACHE_DIR=${FP8JIT_CACHE_DIR:-/tmp/fp8jit-cache}
python3 tests/gpu/cast_compare.py --cli "$B/fp8jit" --inference "$PWD/.carry/deepseek-v3/inference" \
  --gib "${GIB:-2}" 2>&1 | tee "$OUT/cast_compare.txt"
status=${PIPESTATUS[0]}
rm -rf /tmp/fp8jit-cast  # several GB of checkpoints
exit "$status"
