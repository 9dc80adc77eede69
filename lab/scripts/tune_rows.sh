#!/usr/bin/env bash
# One device call that re-tunes some rows of a shape suite and brings their winners back as a
# database export, for `lab/scripts/merge_shipped_rows.py` to put into a shipped document
# (share/fp8jit/tuning/<gpu>.json). Masked rows are timed on two draws of rows per group (the
# tuner's more_group_rows), so each takes ~40 s on an H200. GPU tests matching GTESTS run after
# the tuning with the time left (none by default).
# Usage (repo root, on the device):
#   OUT=$OUT ROWS='^masked,[0-9]+,[0-9]+,7168,2048,' bash lab/scripts/tune_rows.sh
# Environment: SUITE (default bench/shapes/deepseek_v3_moe.csv), ROWS (an extended regex the
# suite's rows must match; required), GTESTS (a gtest filter), LIMIT_S (default 585).
# Writes $OUT/check.log, $OUT/tune.md (the tuner's table), $OUT/rows.json (`fp8jit db export`)
# and, with GTESTS, $OUT/gtests.txt. Bad settings stop it before anything is built or written.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
suite=${SUITE:-bench/shapes/deepseek_v3_moe.csv}
rows=${ROWS:-}
[ -n "$rows" ] || { echo "tune_rows.sh: ROWS is empty: give an extended regex of the suite's rows" >&2; exit 2; }
[ ${#rows} -le 400 ] || { echo "tune_rows.sh: ROWS is ${#rows} characters: at most 400" >&2; exit 2; }
[ -f "$suite" ] || { echo "tune_rows.sh: SUITE='$suite': no such file" >&2; exit 2; }
matched=$(grep -E -- "$rows" "$suite" 2>/dev/null)
[ $? -le 1 ] || { echo "tune_rows.sh: ROWS='$rows' is not an extended regex" >&2; exit 2; }
picked=$(grep -v '^#' <<< "$matched" | grep -E '^[a-z]+,[0-9]')
[ -n "$picked" ] || { echo "tune_rows.sh: ROWS='$rows' matches no row of $suite" >&2; exit 2; }
header=$(grep -v '^#' "$suite" | grep -m1 -E '^[a-z_]+(,[a-z_]+)+$')
[ -n "$header" ] || { echo "tune_rows.sh: $suite has no header line (e.g. layout,groups,m,n,k,expected_m)" >&2; exit 2; }
OUT=${OUT:?set OUT to the output folder}
LIMIT_S=${LIMIT_S:-585}
source lab/scripts/ab_common.sh  # sqlite_args, call_log, step, left
call_log || exit 1
step "build"
{ cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFP8JIT_BUILD_BENCH=OFF "${sqlite_args[@]}" &&
  cmake --build build-gpu -j"$(nproc)" --target fp8jit_cli $([ -n "${GTESTS:-}" ] && echo fp8jit_gpu_tests); } \
  > /tmp/tune_rows_build.log 2>&1 || { step "build failed"; tail -30 /tmp/tune_rows_build.log; exit 1; }
shapes=/tmp/tune_rows_shapes.csv
{ echo "$header"; echo "$picked"; } > "$shapes"
step "tune $(echo "$picked" | wc -l) rows of $suite"
db=/tmp/tune_rows.sqlite
rm -f "$db" "$db-wal" "$db-shm"
reserve=$([ -n "${GTESTS:-}" ] && echo 120 || echo 20)
FP8JIT_CACHE_DIR=/tmp/tune-rows-cache timeout $(($(left) - reserve)) ./build-gpu/fp8jit tune --shapes "$shapes" \
  --db "$db" --jobs "$(nproc)" > "$OUT/tune.md" 2> /tmp/tune_rows.err
step "tune rc $?"; tail -12 "$OUT/tune.md"; tail -3 /tmp/tune_rows.err
./build-gpu/fp8jit db export --db "$db" --file "$OUT/rows.json" > /dev/null 2>&1 &&
  step "exported $(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["rows"]))' "$OUT/rows.json") rows to rows.json"
if [ -n "${GTESTS:-}" ] && [ "$(left)" -gt 20 ]; then
  step "GPU tests '$GTESTS' within $(left) s"
  timeout $(($(left) - 5)) ./build-gpu/tests/fp8jit_gpu_tests --gtest_filter="$GTESTS" > "$OUT/gtests.txt" 2>&1
  step "GPU tests rc $?"
  grep -E '^\[  (PASSED|FAILED) |^\[==========\]|^\[  FAILED  \]' "$OUT/gtests.txt" | tail -12
fi
step "end"
