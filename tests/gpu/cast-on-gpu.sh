#!/usr/bin/env bash
# fp8jit cast on a lent Hopper machine: builds the CLI, then tests/gpu/cast_compare.py against
# DeepSeek-V3's fp8_cast_bf16.py (byte for byte, speed, FP8 round trip, host path = GPU path).
# Usage (repo root): bash tests/gpu/cast-on-gpu.sh      GIB=2 sets the checkpoint size; logs in $OUT.
# Needs .carry/deepseek-v3/inference with fp8_cast_bf16.py and kernel.py (lab/README.md).
set -uo pipefail
OUT=${OUT:-/tmp/fp8jit-cast-out}
mkdir -p "$OUT"
B=build-gpu
sqlite_args=()
if [ ! -f /usr/include/sqlite3.h ] && [ -f .carry/sqlite/sqlite3.h ]; then
  sqlite_args=(-DSQLite3_INCLUDE_DIR="$PWD/.carry/sqlite" -DSQLite3_LIBRARY=/lib/x86_64-linux-gnu/libsqlite3.so.0)
fi
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release "${sqlite_args[@]}" > "$OUT/cast-cmake.log" 2>&1 || { tail -30 "$OUT/cast-cmake.log"; exit 1; }
cmake --build $B -j"$(nproc)" --target fp8jit_cli > "$OUT/cast-build.log" 2>&1 || { tail -40 "$OUT/cast-build.log"; exit 1; }
export FP8JIT_CACHE_DIR=${FP8JIT_CACHE_DIR:-/tmp/fp8jit-cache}
python3 tests/gpu/cast_compare.py --cli "$B/fp8jit" --inference "$PWD/.carry/deepseek-v3/inference" \
  --gib "${GIB:-2}" 2>&1 | tee "$OUT/cast_compare.txt"
status=${PIPESTATUS[0]}
rm -rf /tmp/fp8jit-cast  # several GB of checkpoints
exit "$status"
