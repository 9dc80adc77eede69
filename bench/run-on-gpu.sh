#!/usr/bin/env bash
# The whole benchmark on a fresh Hopper machine, in a few minutes: configure and build
# fp8jit_bench and the fp8jit CLI (Release), run the quantize/dequantize benchmarks and the GEMM
# benchmarks against cuBLASLt (DeepSeek-V3 shapes, block and per-tensor scaling), write everything
# to one directory and chart it with bench/plot.sh (skipped, with a note, where gnuplot is missing:
# run `bash bench/plot.sh DIR` later on any machine).
#
# Usage (repo root): bash bench/run-on-gpu.sh
#   OUT=DIR        results directory (default bench/results/<gpu>-<date>, e.g. h200-2026-11-24;
#                  the repository keeps only the newest set per GPU, as bench/results/<gpu>-latest)
#   BUILD_DIR=DIR  build tree (default build-gpu, shared with tests/gpu/run-on-gpu.sh)
#   SUITE=deepseek-v3|square  SCALES=block,tensor  PROVIDERS=fp8jit,cublaslt   GEMM options
# Writes: gpu.txt, quant.txt, quant.json, quant.csv, gemm.txt, gemm.md, gemm.csv, gemm_rows.json,
# gemm.json, *.png; cmake.log, build.log and quant.log (Google Benchmark's context) as well.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
B=${BUILD_DIR:-build-gpu}
SUITE=${SUITE:-deepseek-v3}
SCALES=${SCALES:-block,tensor}
PROVIDERS=${PROVIDERS:-fp8jit,cublaslt}
export FP8JIT_CACHE_DIR=${FP8JIT_CACHE_DIR:-/tmp/fp8jit-cache}
step() { echo "=== $* ($(date +%T))"; }

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "run-on-gpu.sh: no NVIDIA GPU here (nvidia-smi fails); this script is for a Hopper machine" >&2
  exit 1
fi
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
# "NVIDIA H200" -> h200, "NVIDIA H100 80GB HBM3" -> h100-80gb-hbm3
gpu_slug=$(printf '%s' "$gpu_name" | sed -e 's/^NVIDIA //' | tr '[:upper:]' '[:lower:]' | tr -cs 'a-z0-9' '-' | sed -e 's/^-//' -e 's/-$//')
OUT=${OUT:-bench/results/${gpu_slug:-gpu}-$(date +%F)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
status=0

step "build ($B) for $gpu_name -> $OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
sqlite_args=()
if [ ! -f /usr/include/sqlite3.h ] && [ -f .carry/sqlite/sqlite3.h ]; then
  # A machine with the SQLite runtime but no headers: the header travels with the tree.
  sqlite_args=(-DSQLite3_INCLUDE_DIR="$PWD/.carry/sqlite" -DSQLite3_LIBRARY=/lib/x86_64-linux-gnu/libsqlite3.so.0)
fi
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release "${sqlite_args[@]}" > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
grep -q "Google Benchmark not found" "$OUT/cmake.log" && { echo "run-on-gpu.sh: Google Benchmark (libbenchmark-dev) is missing: no fp8jit_bench" >&2; exit 1; }
cmake --build "$B" -j"$(nproc)" --target fp8jit_cli fp8jit_bench > "$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; }
bench_exe=./$B/bench/fp8jit_bench
cli=./$B/fp8jit
"$cli" info | head -3

step "quantize / dequantize (BM_*: bandwidth against the copy, JIT latency)"
"$bench_exe" --benchmark_filter='^BM_' --out="$OUT" \
  --benchmark_out="$OUT/quant.json" --benchmark_out_format=json > "$OUT/quant.txt" 2> "$OUT/quant.log" || status=1
grep -vE '^\*\*\*|^---' "$OUT/quant.txt"
grep -q 'ERROR OCCURRED' "$OUT/quant.txt" && status=1

step "GEMM: fp8jit bench --suite $SUITE --scale $SCALES --providers $PROVIDERS"
"$cli" bench --suite "$SUITE" --scale "$SCALES" --providers "$PROVIDERS" --out "$OUT" > "$OUT/gemm.txt" 2>&1 || status=1
sed -n '/^GEMM on/,$p' "$OUT/gemm.txt"
if [ ! -s "$OUT/gemm.csv" ]; then
  echo "run-on-gpu.sh: no gemm.csv; the end of gemm.txt:" >&2
  tail -20 "$OUT/gemm.txt" >&2
  status=1
fi

step "charts"
if command -v gnuplot >/dev/null 2>&1; then
  bash bench/plot.sh "$OUT" || status=1
else
  echo "gnuplot is not installed here: charts skipped; later, anywhere: bash bench/plot.sh $OUT"
fi
step "done: $OUT (status $status)"
ls "$OUT"
exit $status
