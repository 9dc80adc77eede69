#!/usr/bin/env bash
# A/B of template or host patches through the tuner: builds the fp8jit CLI once per variant (the
# tree as it is, then a copy with each patch applied) and runs `fp8jit tune` on the same shapes,
# so every candidate config the tuner picks (clusters included) is timed under each variant.
# Usage (repo root): bash lab/scripts/ab_tune.sh SHAPES.csv SCALE TOP_K [PATCH...]
# Logs and each variant's exported database: $OUT (default /tmp/fp8jit-ab-tune)/<variant>.{txt,json};
# AB_BASE_BUILD=DIR reuses that build tree for the base.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
[ $# -ge 3 ] || { echo "usage: bash lab/scripts/ab_tune.sh SHAPES.csv SCALE TOP_K [PATCH...]" >&2; exit 2; }
shapes=$(realpath "$1"); scale=$2; top_k=$3; shift 3
OUT=${OUT:-/tmp/fp8jit-ab-tune}
mkdir -p "$OUT"
source lab/scripts/ab_common.sh
measure() {  # name, build tree
  rm -f "$OUT/$1.sqlite"
  FP8JIT_CACHE_DIR=/tmp/fp8jit-ab-cache/$1 "$2/fp8jit" tune --shapes "$shapes" --scale "$scale" --top-k "$top_k" \
    --jobs "$(nproc)" --db "$OUT/$1.sqlite" 2>&1 | tr '\r' '\n' | grep -v '^shape ' > "$OUT/$1.txt"
  "$2/fp8jit" db export --db "$OUT/$1.sqlite" --file "$OUT/$1.json" 2>/dev/null
  echo "== $1"
  python3 - "$OUT/$1.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    t = r["timings"]; t = json.loads(t) if isinstance(t, str) else t
    for c in t:
        cfg = c["config"]["config"]
        print(f'{r["m"]}x{r["n"]}x{r["k"]} {cfg["block_m"]}x{cfg["block_n"]} s{cfg["stages"]} g{cfg["group_m"]} '
              f'c{cfg.get("cluster_m", 1)}{cfg.get("cluster_n", 1)}: {c["median_us"]:.1f} us {c["status"]}')
PY
}
ab_all fp8jit_cli "$@"
