#!/usr/bin/env bash
# A quick A/B of template patches, every variant built at once (CLI and fp8jit_bench): for each
# variant the SASS of SPEC's kernel (instruction count, S2R, registers) and fp8jit_bench's GEMM
# times (L2 flushed, median) over the m,n,k rows of SHAPES (a CSV), ROUNDS rounds with the variants
# interleaved; medians of the rounds, as a ratio to the tree.
# Usage (repo root, on the device): SPEC='{...}' SHAPES=F.csv bash lab/probes/cli_ab.sh PATCH...
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/fp8jit-cli-ab}
mkdir -p "$OUT"
source lab/scripts/ab_common.sh  # sqlite_args, ab_patch_tree
build_cli() {  # name, source dir
  cmake -S "$2" -B "/tmp/fp8jit-cli-ab/$1" -DCMAKE_BUILD_TYPE=Release -DFP8JIT_BUILD_TESTS=OFF \
    "${sqlite_args[@]}" > "$OUT/$1-cmake.log" 2>&1 &&
    cmake --build "/tmp/fp8jit-cli-ab/$1" -j"$(nproc)" --target fp8jit_cli fp8jit_bench > "$OUT/$1-build.log" 2>&1 ||
    { echo "== $1: build failed"; tail -15 "$OUT/$1-build.log"; return 1; }
}
names=(base) pids=()
build_cli base . & pids+=($!)
for p in "$@"; do
  n=$(basename "$p" .patch)
  ab_patch_tree "$p" || { echo "== $n does not apply"; continue; }
  names+=("$n")
  build_cli "$n" "/tmp/fp8jit-ab-src/$n" & pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || exit 1; done
echo "== SASS of $SPEC"
for n in "${names[@]}"; do
  FP8JIT_CACHE_DIR=/tmp/fp8jit-cli-ab-cache/$n "/tmp/fp8jit-cli-ab/$n/fp8jit" compile --spec "$SPEC" --cubin "$OUT/$n.cubin" \
    > /dev/null || { echo "$n: compile failed"; continue; }
  cuobjdump -sass "$OUT/$n.cubin" | grep -E '^\s+/\*[0-9a-f]{4}\*/' | sed -E 's/ +/ /g; s/;.*$//' > "$OUT/$n.sass"
  # The K loop: from the first stage wait (TRYWAIT) after the first QGMMA's setup to its back branch.
  printf '%-40s %5d instructions, S2R %d (all), QGMMA %d, registers %s\n' "$n" "$(wc -l < "$OUT/$n.sass")" \
    "$(grep -c ' S2R ' "$OUT/$n.sass")" "$(grep -c QGMMA "$OUT/$n.sass")" \
    "$(cuobjdump -res-usage "$OUT/$n.cubin" 2>/dev/null | grep -o 'REG:[0-9]*' | head -1)"
done
echo "== fp8jit_bench, ${ROUNDS:-2} rounds (block scaling)"
for ((r = 0; r < ${ROUNDS:-2}; ++r)); do
  for v in "${names[@]}"; do
    FP8JIT_CACHE_DIR=/tmp/fp8jit-cli-ab-cache/$v "/tmp/fp8jit-cli-ab/$v/bench/fp8jit_bench" --benchmark_filter='^Gemm/' \
      --shapes="$SHAPES" --scales="${SCALE:-block}" --providers=fp8jit --out="$OUT/bench-$v-$r" > "$OUT/bench-$v-$r.txt" 2>&1
    awk -F, -v v="$v" -v r="$r" 'NR > 1 && $5 == "fp8jit" { print r, $1 "x" $2 "x" $3, v, $7 }' \
      "$OUT/bench-$v-$r/gemm.csv" >> "$OUT/times.txt"
  done
done
python3 - "$OUT/times.txt" "${names[@]}" <<'EOF'
import collections, statistics, sys
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r, s, v, us = line.split()
    t[(s, v)].append(float(us))
names = sys.argv[2:]
shapes = list(dict.fromkeys(s for s, _ in t))
print(f"{'shape':<18}" + "".join(f"{n[:28]:>30}" for n in names))
for s in shapes:
    base = statistics.median(t[(s, "base")])
    cells = [f"{statistics.median(t[(s, n)]):8.1f} us ({base / statistics.median(t[(s, n)]):.3f}x)" for n in names]
    print(f"{s:<18}" + "".join(f"{c:>30}" for c in cells))
EOF
