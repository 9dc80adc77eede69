#!/usr/bin/env bash
# A/B of template or host patches through the tuner: builds the fp8jit CLI once per variant (the
# tree as it is, then a copy with each patch applied) and runs `fp8jit tune` on the same shapes,
# so every candidate config the tuner picks (clusters included) is timed under each variant.
# Usage (repo root): bash bench/ab_tune.sh SHAPES.csv SCALE TOP_K [PATCH...]
# Logs and each variant's exported database: $OUT (default /tmp/fp8jit-ab-tune)/<variant>.{txt,json};
# AB_BASE_BUILD=DIR reuses that build tree for the base.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
[ $# -ge 3 ] || { echo "usage: bash bench/ab_tune.sh SHAPES.csv SCALE TOP_K [PATCH...]" >&2; exit 2; }
shapes=$(realpath "$1"); scale=$2; top_k=$3; shift 3
OUT=${OUT:-/tmp/fp8jit-ab-tune}
mkdir -p "$OUT"
sqlite_args=()
if [ ! -f /usr/include/sqlite3.h ] && [ -f .carry/sqlite/sqlite3.h ]; then
  sqlite_args=(-DSQLite3_INCLUDE_DIR="$PWD/.carry/sqlite" -DSQLite3_LIBRARY=/lib/x86_64-linux-gnu/libsqlite3.so.0)
fi
run_variant() {  # name, source dir[, existing build tree]
  local name=$1 src=$2 b=${3:-/tmp/fp8jit-ab-build/$1}
  cmake -S "$src" -B "$b" -DCMAKE_BUILD_TYPE=Release "${sqlite_args[@]}" > "$OUT/$name.cmake.log" 2>&1 &&
    cmake --build "$b" -j"$(nproc)" --target fp8jit_cli > "$OUT/$name.build.log" 2>&1 ||
    { echo "== $name: build failed"; tail -20 "$OUT/$name.build.log"; return 1; }
  rm -f "$OUT/$name.sqlite"
  FP8JIT_CACHE_DIR=/tmp/fp8jit-ab-cache/$name "$b/fp8jit" tune --shapes "$shapes" --scale "$scale" --top-k "$top_k" \
    --jobs "$(nproc)" --db "$OUT/$name.sqlite" 2>&1 | tr '\r' '\n' | grep -v '^shape ' > "$OUT/$name.txt"
  "$b/fp8jit" db export --db "$OUT/$name.sqlite" --file "$OUT/$name.json" 2>/dev/null
  echo "== $name"
  python3 - "$OUT/$name.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    t = r["timings"]; t = json.loads(t) if isinstance(t, str) else t
    for c in t:
        cfg = c["config"]["config"]
        print(f'{r["m"]}x{r["n"]}x{r["k"]} {cfg["block_m"]}x{cfg["block_n"]} s{cfg["stages"]} g{cfg["group_m"]} '
              f'c{cfg.get("cluster_m", 1)}{cfg.get("cluster_n", 1)}: {c["median_us"]:.1f} us {c["status"]}')
PY
}
run_variant base "$PWD" "${AB_BASE_BUILD:-}"
for patch in "$@"; do
  name=$(basename "$patch" .patch)
  dir=/tmp/fp8jit-ab-src/$name
  rm -rf "$dir" && mkdir -p "$dir" &&
    tar -c --exclude='./build*' --exclude=./.git --exclude='./bench/results' . | tar -x -C "$dir"
  patch -s -p1 -d "$dir" < "$patch" || { echo "== $name: patch does not apply"; continue; }
  run_variant "$name" "$dir"
done
