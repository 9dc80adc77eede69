#!/usr/bin/env bash
# Quick GEMM bring-up on a lent GPU: build, gemm GPU tests, one timed GEMM per scale mode, SASS.
set -uo pipefail
OUT=${OUT:-/tmp/fp8jit-gpu-out}; mkdir -p "$OUT"
B=build-gpu
export FP8JIT_CACHE_DIR=/tmp/fp8jit-cache
sq=(); [ -f /usr/include/sqlite3.h ] || sq=(-DSQLite3_INCLUDE_DIR="$PWD/.carry/sqlite" -DSQLite3_LIBRARY=/lib/x86_64-linux-gnu/libsqlite3.so.0)
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release "${sq[@]}" > "$OUT/cmake.log" 2>&1 || { tail -20 "$OUT/cmake.log"; exit 1; }
cmake --build $B -j"$(nproc)" --target fp8jit_cli fp8jit_gpu_tests > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -20; exit 1; }
for s in block tensor; do timeout 60 ./$B/fp8jit gemm --m 4096 --n 7168 --k 7168 --scale $s --iters 10; done
timeout 60 ./$B/fp8jit gemm --m 65 --n 24 --k 144 --scale block --iters 2
timeout 300 ./$B/tests/fp8jit_gpu_tests --gtest_filter='GemmGpu.*' --gtest_brief=1 2>&1 | tail -40
