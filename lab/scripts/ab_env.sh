#!/usr/bin/env bash
# A/B timing of run-time settings on a Hopper machine: one fp8jit_bench build, the GEMM benchmark
# run once per setting (e.g. FP8JIT_SPLIT_SUM=workspace against the default) on the same shapes,
# each variant's table printed. lab/scripts/ab.sh does the same for template patches.
#
# Usage (repo root, fp8jit_bench built in $BUILD_DIR, default build-gpu):
#   bash lab/scripts/ab_env.sh SHAPES.csv SCALES [VAR=VALUE[,VAR=VALUE]...]...
#   e.g. bash lab/scripts/ab_env.sh lab/shapes/small_m.csv block,tensor FP8JIT_SPLIT_SUM=workspace
# The first variant is always the environment as it is ("base"). Logs: $OUT (default /tmp/fp8jit-ab-env).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
[ $# -ge 2 ] || { echo "usage: bash lab/scripts/ab_env.sh SHAPES.csv SCALES [VAR=VALUE[,...]]..." >&2; exit 2; }
shapes=$(realpath "$1"); scales=$2; shift 2
B=${BUILD_DIR:-build-gpu}
OUT=${OUT:-/tmp/fp8jit-ab-env}
mkdir -p "$OUT"
measure() {  # name, then VAR=VALUE words for env
  local name=$1
  shift
  env FP8JIT_CACHE_DIR=/tmp/fp8jit-ab-env-cache "$@" "./$B/bench/fp8jit_bench" --benchmark_filter='^Gemm/' \
    --shapes="$shapes" --scales="$scales" --providers=fp8jit,cublaslt --out="$OUT/$name" > "$OUT/$name.txt" 2>&1
  echo "== $name $*"
  sed -n '/^| M/,$p' "$OUT/$name.txt" | cut -d'|' -f2-7,11
}
measure base
for variant in "$@"; do
  measure "$(echo "$variant" | tr ',=' '__')" ${variant//,/ }
done
