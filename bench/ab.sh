#!/usr/bin/env bash
# A/B timing of template experiments on a Hopper machine: builds fp8jit_bench once per variant
# (the tree as it is, then a copy with each patch applied; templates are embedded at build time)
# and runs the GEMM benchmark on the same shapes, printing each variant's table. Results are
# what bench/NOTES.md cites for an experiment; the patches stay in bench/experiments/ as record.
#
# Usage (repo root): bash bench/ab.sh SHAPES.csv SCALES [PATCH...]
#   e.g. bash bench/ab.sh bench/shapes/tune_sample.csv block bench/experiments/*.patch
# Logs: $OUT (default /tmp/fp8jit-ab)/<variant>.txt; AB_BASE_BUILD=DIR reuses that build tree for the base.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
[ $# -ge 2 ] || { echo "usage: bash bench/ab.sh SHAPES.csv SCALES [PATCH...]" >&2; exit 2; }
shapes=$(realpath "$1"); scales=$2; shift 2
OUT=${OUT:-/tmp/fp8jit-ab}
mkdir -p "$OUT"
sqlite_args=()
if [ ! -f /usr/include/sqlite3.h ] && [ -f .carry/sqlite/sqlite3.h ]; then
  sqlite_args=(-DSQLite3_INCLUDE_DIR="$PWD/.carry/sqlite" -DSQLite3_LIBRARY=/lib/x86_64-linux-gnu/libsqlite3.so.0)
fi
run_variant() {  # name, source dir[, existing build tree]
  local name=$1 src=$2 b=${3:-/tmp/fp8jit-ab-build/$1}
  cmake -S "$src" -B "$b" -DCMAKE_BUILD_TYPE=Release "${sqlite_args[@]}" > "$OUT/$name.cmake.log" 2>&1 &&
    cmake --build "$b" -j"$(nproc)" --target fp8jit_bench > "$OUT/$name.build.log" 2>&1 ||
    { echo "== $name: build failed"; tail -20 "$OUT/$name.build.log"; return 1; }
  FP8JIT_CACHE_DIR=/tmp/fp8jit-ab-cache/$name "$b/bench/fp8jit_bench" --benchmark_filter=Gemm --shapes="$shapes" \
    --scales="$scales" --providers=fp8jit,cublaslt --out="$OUT/$name" > "$OUT/$name.txt" 2>&1
  echo "== $name"
  sed -n '/^| M/,$p' "$OUT/$name.txt" | cut -d'|' -f2-7,11
}
# AB_BASE_BUILD: a build tree of this checkout to reuse for the base (e.g. build-gpu).
run_variant base "$PWD" "${AB_BASE_BUILD:-}"
for patch in "$@"; do
  name=$(basename "$patch" .patch)
  dir=/tmp/fp8jit-ab-src/$name
  # A plain copy (the device machine's tree may have no .git), build trees left out.
  rm -rf "$dir" && mkdir -p "$dir" &&
    tar -c --exclude='./build*' --exclude=./.git --exclude='./bench/results' . | tar -x -C "$dir"
  patch -s -p1 -d "$dir" < "$patch" || { echo "== $name: patch does not apply"; continue; }
  run_variant "$name" "$dir"
done
