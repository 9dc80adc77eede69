#!/usr/bin/env bash
# Grouped (mixture-of-experts) GEMMs through the CLI on a lent GPU: builds fp8jit, runs
# `fp8jit gemm --groups` for both layouts and two scale modes (each checked group by group against
# the float64 reference, rows outside the groups still poisoned), tunes two rows of the
# deepseek-v3-moe suite into a fresh database, and shows that the lookup and the runtime take the
# tuned rows (exact and nearest expected M) and that another group count does not. Exits non-zero
# on any failure; logs go to $OUT (default /tmp/fp8jit-gpu-out).
# Usage (repo root): bash tests/gpu/grouped-cli-smoke.sh   (B=<build dir>, default build-gpu)
set -uo pipefail
OUT=${OUT:-/tmp/fp8jit-gpu-out}
mkdir -p "$OUT"
B=${B:-build-gpu}
export FP8JIT_CACHE_DIR=${FP8JIT_CACHE_DIR:-/tmp/fp8jit-cache}
TMP=$(mktemp -d /tmp/fp8jit-grouped-smoke-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
# No tuned rows in the first runs: the heuristic's kernels (a lookup never creates this file).
export FP8JIT_DB="$TMP/none.sqlite"
status=0
step() { echo "=== $*"; }
fail() {
  echo "FAIL: $*"
  status=1
}

step "build"
sq=()
[ -f /usr/include/sqlite3.h ] || sq=(-DSQLite3_INCLUDE_DIR="$PWD/.carry/sqlite" -DSQLite3_LIBRARY=/lib/x86_64-linux-gnu/libsqlite3.so.0)
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release "${sq[@]}" > "$OUT/cmake.log" 2>&1 || { tail -20 "$OUT/cmake.log"; exit 1; }
cmake --build "$B" -j"$(nproc)" --target fp8jit_cli > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -20; exit 1; }
F="./$B/fp8jit"

step "grouped gemm: every layout, block and tensor scaling"
CONTIGUOUS=(--layout contiguous --groups 8 --m 4096 --n 4096 --k 7168)
MASKED=(--layout masked --groups 16 --m 256 --n 7168 --k 2048 --expected-m 64)
INDEXED=(--layout indexed --groups 8 --m 4096 --n 4096 --k 7168)
for scale in block tensor; do
  timeout 300 "$F" gemm "${CONTIGUOUS[@]}" --scale "$scale" --iters 10 || fail "gemm contiguous --scale $scale"
  timeout 300 "$F" gemm "${MASKED[@]}" --scale "$scale" --iters 10 || fail "gemm masked --scale $scale"
  timeout 300 "$F" gemm "${INDEXED[@]}" --scale "$scale" --iters 10 || fail "gemm indexed --scale $scale"
done
# Ragged and off the tile: 5 groups over 1000 rows of N=320, K=384, rowwise scaling, fp32 out.
timeout 300 "$F" gemm --layout contiguous --groups 5 --m 1000 --n 320 --k 384 --scale rowwise --out fp32 --iters 2 ||
  fail "gemm contiguous ragged rowwise fp32"
timeout 300 "$F" gemm --layout masked --groups 4 --m 200 --n 256 --k 512 --expected-m 30 --out fp16 --iters 2 ||
  fail "gemm masked ragged fp16"

step "tune two rows of the deepseek-v3-moe suite"
DB="$TMP/tuning.sqlite"
suite=bench/shapes/deepseek_v3_moe.csv
{
  echo "layout,groups,m,n,k,expected_m"
  grep -m1 '^contiguous,8,4096,4096,7168,512$' "$suite"
  grep -m1 '^masked,32,128,7168,2048,16$' "$suite"
} > "$TMP/moe2.csv"
[ "$(wc -l < "$TMP/moe2.csv")" = 3 ] || fail "the two suite rows are not in $suite"
timeout 1500 "$F" tune --shapes "$TMP/moe2.csv" --db "$DB" --top-k 8 | tee "$OUT/grouped_tune.md" || fail "tune"
grep -q "none passed" "$OUT/grouped_tune.md" && fail "a tuned row had no passing candidate"
"$F" db list --db "$DB" | tee "$OUT/grouped_db.txt"
[ "$(grep -c '^NVIDIA' "$OUT/grouped_db.txt")" -ge 2 ] || fail "fewer than 2 tuned rows in $DB"

# select-gemm --db names the spec it picked and its source on stderr: "<name> from <source>".
# Leaves the spec in $TMP/spec.json and its name in $TMP/name (not on stdout: `fail` must run in
# this shell, not in a command substitution's).
selected() {  # expected source, then select-gemm's options
  local want=$1
  shift
  : > "$TMP/name"
  "$F" select-gemm "$@" --db "$DB" > "$TMP/spec.json" 2> "$TMP/select.err" || { fail "select-gemm $*: $(cat "$TMP/select.err")"; return; }
  grep -q " from ${want}\$" "$TMP/select.err" || fail "select-gemm $*: expected the ${want}'s spec, got: $(cat "$TMP/select.err")"
  sed -n 's/^fp8jit select-gemm: \(.*\) from .*$/\1/p' "$TMP/select.err" > "$TMP/name"
}

step "the lookup and the runtime take the tuned rows"
check_row() {  # db show filter (m n k), then the row's options
  local m=$1 n=$2 k=$3
  shift 3
  selected database "$@"
  local name
  name=$(cat "$TMP/name")
  [ -n "$name" ] || return
  "$F" db show --db "$DB" --m "$m" --n "$n" --k "$k" | grep -q "best: *$name " || fail "$name is not the stored best of m=$m n=$n k=$k"
  "$F" compile --spec "$(cat "$TMP/spec.json")" --cubin "$TMP/k.cubin" > /dev/null || fail "compile $name"
  # The runtime itself (gemm picks its kernel through Runtime::select) takes the row.
  FP8JIT_DB="$DB" timeout 300 "$F" gemm "$@" --iters 3 | tee "$TMP/run.txt" || fail "gemm with the tuned row: $*"
  grep -q "^$name \[" "$TMP/run.txt" || fail "gemm $* did not run the tuned $name"
  echo "tuned row used: $name"
}
check_row 512 4096 7168 --layout contiguous --groups 8 --m 4096 --n 4096 --k 7168 --expected-m 512
check_row 16 7168 2048 --layout masked --groups 32 --m 128 --n 7168 --k 2048 --expected-m 16
selected "database (nearest M)" --layout contiguous --groups 8 --m 4096 --n 4096 --k 7168 --expected-m 400
selected "database (nearest M)" --layout masked --groups 32 --m 128 --n 7168 --k 2048 --expected-m 24
# Another group count or layout is another problem: the heuristic.
selected heuristic --layout contiguous --groups 16 --m 8192 --n 4096 --k 7168 --expected-m 512
selected heuristic --layout masked --groups 8 --m 512 --n 4096 --k 7168 --expected-m 512

[ $status = 0 ] && echo "grouped CLI smoke: all passed" || echo "grouped CLI smoke: FAILED (see above)"
exit $status
