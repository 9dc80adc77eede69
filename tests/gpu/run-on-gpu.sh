#!/usr/bin/env bash
# Builds fp8jit on a lent Hopper machine and runs the GPU tests, the PyTorch cross-check, the
# demo, the SASS checks and the benchmarks. Logs go to $OUT (default /tmp/fp8jit-gpu-out).
# Usage (repo root): bash tests/gpu/run-on-gpu.sh [quick|all|build-only]   (all: also the no-GPU unit tests)
#   quick skips compute-sanitizer and the benchmarks; BENCH=0 skips only the benchmarks;
#   CATALOGUE=1 also runs the whole catalogue of bad inputs (tests/catalogue) with the GPU.
set -uo pipefail
MODE=${1:-}  # the SASS loop below reuses the positional parameters
OUT=${OUT:-/tmp/fp8jit-gpu-out}
mkdir -p "$OUT"
B=build-gpu
export FP8JIT_CACHE_DIR=/tmp/fp8jit-cache
sqlite_args=()
if [ ! -f /usr/include/sqlite3.h ] && [ -f .carry/sqlite/sqlite3.h ]; then
  sqlite_args=(-DSQLite3_INCLUDE_DIR="$PWD/.carry/sqlite" -DSQLite3_LIBRARY=/lib/x86_64-linux-gnu/libsqlite3.so.0)
fi
status=0
step() { echo "=== $*"; }
step "build"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release "${sqlite_args[@]}" > "$OUT/cmake.log" 2>&1 || { cat "$OUT/cmake.log"; exit 1; }
targets=(fp8jit_cli fp8jit_gpu_tests fp8jit_bench example_quantize_gemm_cpp example_quantize_gemm_c)
[ "$MODE" = "all" ] && targets+=(fp8jit_tests)
cmake --build $B -j"$(nproc)" --target "${targets[@]}" > "$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; }
./$B/fp8jit info | head -3
[ "$MODE" = "build-only" ] && exit 0
step "gpu tests"
mkdir -p "$OUT/dump"
FP8JIT_TORCH_DUMP="$OUT/dump" ./$B/tests/fp8jit_gpu_tests --gtest_brief=1 > "$OUT/gpu_tests.log" 2>&1 || status=1
tail -5 "$OUT/gpu_tests.log"
grep -E "FAILED|Failure" "$OUT/gpu_tests.log" | head -20
step "examples (C++ and C ABI)"
for e in example_quantize_gemm_cpp example_quantize_gemm_c; do
  f=$(find $B -name "$e" -type f | head -1); [ -n "$f" ] && { "$f" || status=1; }
done
step "torch cross-check"
python3 tests/gpu/torch_check.py "$OUT/dump" || status=1
rm -rf "$OUT/dump"
if [ -x ./$B/tests/fp8jit_tests ]; then
  step "unit tests on the GPU machine"
  ./$B/tests/fp8jit_tests --gtest_brief=1 > "$OUT/unit_tests.log" 2>&1 || status=1
  tail -3 "$OUT/unit_tests.log"
fi
step "demo"
./$B/fp8jit demo || status=1
step "SASS of the default kernels"
for shape in "4096 7168 7168" "4096 4096 7168" "64 2112 7168" "128 24576 1536"; do
  for scale in block tensor; do
    set -- $shape
    spec=$(./$B/fp8jit select-gemm --m $1 --n $2 --k $3 --scale $scale)
    ./$B/fp8jit compile --spec "$spec" --cubin /tmp/g.cubin > /dev/null
    cuobjdump --dump-sass /tmp/g.cubin > /tmp/g.sass
    # FFMAs with a reuse hint: promotion's, which the FP8JIT_FFMA_REUSE post-pass completes.
    echo "gemm $shape $scale: $(grep -c QGMMA /tmp/g.sass) QGMMA, $(grep -cE '\bLDL|\bSTL' /tmp/g.sass) LDL/STL, $(grep -c UTMALDG /tmp/g.sass) UTMALDG, $(grep -c 'FFMA' /tmp/g.sass) FFMA ($(grep 'FFMA' /tmp/g.sass | grep -c '\.reuse') with reuse)"
  done
done
for spec in '{"family":"quantize","problem":{"input":"bf16","format":"e4m3","granularity":"1x128","transpose":0},"config":{"vec":8,"threads":256,"unroll":2}}' \
            '{"family":"dequantize","problem":{"format":"e4m3","output":"bf16","granularity":"128x128"},"config":{"vec":16,"threads":256,"unroll":2}}'; do
  ./$B/fp8jit compile --spec "$spec" --cubin /tmp/k.cubin > /dev/null
  cuobjdump --dump-sass /tmp/k.cubin > /tmp/k.sass
  echo "$(grep -c 'LDG.E.128' /tmp/k.sass) LDG.128, $(grep -cE 'STG.E.(64|128)' /tmp/k.sass) wide STG, $(grep -cE '\bLDL|\bSTL' /tmp/k.sass) LDL/STL"
done
if [ "$MODE" != "quick" ]; then
  step "compute-sanitizer"
  bash tests/gpu/memcheck.sh "$B" || status=1
fi
if [ "$MODE" != "quick" ] && [ "${BENCH:-1}" != 0 ]; then
  step "bench"
  ./$B/bench/fp8jit_bench --benchmark_filter="${BENCH_FILTER:-^BM_}" --benchmark_out="$OUT/bench_quant.json" --benchmark_out_format=json 2>&1 | tee "$OUT/bench_quant.txt" | grep -vE "^\*\*\*|^---"
  step "gemm bench"
  ./$B/bench/fp8jit_bench --benchmark_filter=Gemm --shapes=bench/shapes/deepseek_v3.csv --scales="${GEMM_SCALES:-block,tensor,tensor_fast}" \
    --out="$OUT" --benchmark_out="$OUT/bench_gemm.json" --benchmark_out_format=json > "$OUT/bench_gemm.txt" 2>&1
  sed -n '/^GEMM on/,$p' "$OUT/bench_gemm.txt"
fi
# The Python package's tests, GPU ones included (tests/gpu/python-on-gpu.sh: its own build for the
# python3 that has torch). Where pytest is neither installed nor carried (.carry/wheels), say so.
if python3 -c "import torch, nanobind" >/dev/null 2>&1; then
  step "python package"
  if python3 -c "import pytest" >/dev/null 2>&1 || ls .carry/wheels/pytest-*.whl >/dev/null 2>&1; then
    OUT="$OUT/python" bash tests/gpu/python-on-gpu.sh || status=1
  else
    echo "skipped: no pytest here and none in .carry/wheels (lab/README.md says how it travels)"
  fi
fi
if [ "${CATALOGUE:-0}" = 1 ]; then
  step "catalogue of bad inputs and faults, with the GPU"
  python3 tests/catalogue/catalogue.py --cli ./$B/fp8jit > "$OUT/catalogue.log" 2>&1 || status=1
  tail -2 "$OUT/catalogue.log"
  grep -E "^FAIL" "$OUT/catalogue.log" | head -20
fi
exit $status
