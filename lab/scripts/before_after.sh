#!/usr/bin/env bash
# A change that must leave the kernels and their speed alone (a refactor), checked in one device
# call: the tree before it (a `git archive` tarball) and the working tree are built side by side;
# lab/check_identical_cubins.sh compares the SASS both generate; the GEMM suite is timed for each
# in turns (before, after, before, after) in one process per run, with cuBLASLt in every run as a
# drift control; the geomean of fp8jit's time ratios (after over before, per shape and scale)
# closes the log.
#
#   git archive -o .carry/before.tar.gz COMMIT     (here; .carry/ is ignored, pass it in `carry`)
#   OLD=.carry/before.tar.gz bash lab/scripts/before_after.sh
#
# NEW: a tarball of the tree after the change, built instead of the working tree (other edits in
# progress there stay out of the comparison).
# OUT (default /tmp/fp8jit-before-after) receives before_N/ and after_N/ (fp8jit bench's tables),
# cubins.txt and summary.txt. SHAPES (bench/shapes/deepseek_v3.csv), SCALES (block,tensor),
# ROUNDS (2); CUBINS=0 skips the SASS comparison.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OLD=${OLD:?set OLD to a git-archive tarball of the tree before the change}
OUT=${OUT:-/tmp/fp8jit-before-after}
SHAPES=${SHAPES:-bench/shapes/deepseek_v3.csv}
SCALES=${SCALES:-block,tensor}
ROUNDS=${ROUNDS:-2}
old_src=/tmp/fp8jit-before-src
mkdir -p "$OUT" "$old_src"
step() { echo "=== $* ($(date +%T))"; }
sqlite_args=()
if [ ! -f /usr/include/sqlite3.h ] && [ -f .carry/sqlite/sqlite3.h ]; then
  sqlite_args=(-DSQLite3_INCLUDE_DIR="$PWD/.carry/sqlite" -DSQLite3_LIBRARY=/lib/x86_64-linux-gnu/libsqlite3.so.0)
fi
build() { # source-dir build-dir log
  cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release "${sqlite_args[@]}" >"$3" 2>&1 &&
    cmake --build "$2" -j"$(nproc)" --target fp8jit_cli fp8jit_bench >>"$3" 2>&1 || { tail -30 "$3"; return 1; }
}

new_src=.
if [ -n "${NEW:-}" ]; then
  new_src=/tmp/fp8jit-after-src
  mkdir -p "$new_src" && tar -xzf "$NEW" -C "$new_src" || exit 1
fi
step "build before ($OLD) and after (${NEW:-working tree})"
tar -xzf "$OLD" -C "$old_src" || exit 1
build "$old_src" /tmp/fp8jit-before-build "$OUT/build_before.log" &
before_pid=$!
build "$new_src" /tmp/fp8jit-after-build "$OUT/build_after.log" || exit 1
wait $before_pid || exit 1
before=/tmp/fp8jit-before-build/fp8jit
after=/tmp/fp8jit-after-build/fp8jit

cubins_status=0
if [ "${CUBINS:-1}" != 0 ]; then
  step "kernels: SASS of the default and sampled gemm specs"
  FP8JIT_DISK_CACHE=0 bash lab/check_identical_cubins.sh "$before" "$after" /tmp/fp8jit-cubin-check >"$OUT/cubins.txt" 2>&1
  cubins_status=$?
  tail -1 "$OUT/cubins.txt"
fi

step "GEMM shapes $SHAPES ($SCALES), $ROUNDS rounds of before then after"
# Each build's own cache directory: the two builds must not share cubins.
for ((r = 1; r <= ROUNDS; r++)); do
  for side in before after; do
    exe=$before
    [ $side = after ] && exe=$after
    FP8JIT_CACHE_DIR=/tmp/fp8jit-cache-$side "$exe" bench --shapes "$SHAPES" --scale "$SCALES" \
      --providers fp8jit,cublaslt --out "$OUT/${side}_$r" >"$OUT/${side}_$r.txt" 2>&1 || echo "$side round $r failed"
  done
done

step "summary"
python3 - "$OUT" "$ROUNDS" <<'EOF' | tee "$OUT/summary.txt"
import csv, math, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def times(side, provider):
    t = {}
    for r in range(1, rounds + 1):
        for row in csv.DictReader(open(f"{out}/{side}_{r}/gemm.csv")):
            if row["provider"] == provider and row["status"] == "passed":
                t.setdefault((row["m"], row["n"], row["k"], row["scale"]), []).append(float(row["time_us"]))
    return {key: sorted(v)[len(v) // 2] for key, v in t.items()}
def geomean(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))
for provider in ("fp8jit", "cublaslt"):
    b, a = times("before", provider), times("after", provider)
    keys = sorted(set(a) & set(b))
    ratios = [b[k] / a[k] for k in keys]
    print(f"{provider}: {len(keys)} shapes x scales; speed after/before geomean {geomean(ratios):.4f}"
          f" (min {min(ratios):.3f}, max {max(ratios):.3f})")
    if provider == "fp8jit":
        for k, x in zip(keys, ratios):
            if abs(x - 1) > 0.03:
                print(f"  {'x'.join(k[:3])} {k[3]}: before {b[k]:.2f} us, after {a[k]:.2f} us ({x:.3f})")
EOF
exit $cubins_status
