#!/usr/bin/env bash
# One device call for a template or heuristic change under test: build build-gpu, the GEMM GPU
# tests (GTEST filter GTESTS, default GemmGpu.*), the config comparisons of lab/scripts/configs.sh for
# each LIST, then the DeepSeek-V3 bench against cuBLASLt (SCALES, default block,tensor; BENCH=0
# skips it).
# Usage (repo root, on the device): bash lab/scripts/experiment.sh [LIST...]; logs under $OUT.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT=${OUT:-/tmp/fp8jit-experiment}
mkdir -p "$OUT"
export FP8JIT_CACHE_DIR=/tmp/fp8jit-cache
log() { echo "=== $* ($(date +%T))"; }
source lab/scripts/ab_common.sh  # sqlite_args
log build
targets=(fp8jit_cli fp8jit_gpu_tests)
[ "${BENCH:-1}" = 1 ] && targets+=(fp8jit_bench)
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release "${sqlite_args[@]}" > "$OUT/cmake.log" 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target "${targets[@]}" > "$OUT/build.log" 2>&1 ||
  { tail -30 "$OUT/build.log"; exit 1; }
log "GPU tests ${GTESTS:-GemmGpu.*}"
./build-gpu/tests/fp8jit_gpu_tests --gtest_brief=1 --gtest_filter="${GTESTS:-GemmGpu.*}" > "$OUT/gpu_tests.log" 2>&1
echo "exit $?"; tail -4 "$OUT/gpu_tests.log"; grep -E "FAILED|Failure" "$OUT/gpu_tests.log" | head -20
for list in "$@"; do
  log "configs $list"
  bash lab/scripts/configs.sh "$list" build-gpu | tee "$OUT/configs_$(basename "$list" .txt).md"
done
[ "${BENCH:-1}" = 1 ] || { log done; exit 0; }
log "GEMM bench (${SCALES:-block,tensor})"
mkdir -p "$OUT/bench"
./build-gpu/fp8jit bench --suite deepseek-v3 --scale "${SCALES:-block,tensor}" --providers fp8jit,cublaslt \
  --out "$OUT/bench" > "$OUT/bench/gemm.txt" 2>&1
sed -n '/^| M/,$p' "$OUT/bench/gemm.txt" | cut -d'|' -f2-7,9,11,12
log done
