#!/usr/bin/env bash
# The SASS of one kernel in the tree and with a patch applied, side by side, for reading where a
# template change moves instructions (barriers, QGMMA issue, DEPBAR waits). Needs no GPU, only
# cuobjdump, so it runs on the device machine (this one has no CUDA binaries).
# Usage (repo root): bash lab/probes/sass_pair.sh PATCH 'SPEC_JSON'
# Writes $OUT/{base,patch}.sass (whole kernel) and $OUT/{base,patch}.loop.sass (from the first
# QGMMA to the last BAR of the kernel) and prints a count of the instructions that matter.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/fp8jit-sass-pair}
mkdir -p "$OUT"
patch=$1 spec=$2
source lab/scripts/ab_common.sh  # sqlite_args, ab_patch_tree
build_cli() {  # source dir, build dir
  cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release -DFP8JIT_BUILD_TESTS=OFF -DFP8JIT_BUILD_BENCH=OFF \
    "${sqlite_args[@]}" > "$OUT/$(basename "$2")-cmake.log" 2>&1 &&
    cmake --build "$2" -j"$(nproc)" --target fp8jit_cli > "$OUT/$(basename "$2")-build.log" 2>&1
}
ab_patch_tree "$patch" || { echo "$patch does not apply"; exit 1; }
src=/tmp/fp8jit-ab-src/$(basename "$patch" .patch)
build_cli . build-gpu & base=$!
build_cli "$src" /tmp/fp8jit-sass-patch & patched=$!
wait $base || { tail -20 "$OUT/build-gpu-build.log"; exit 1; }
wait $patched || { tail -20 "$OUT/fp8jit-sass-patch-build.log"; exit 1; }
for v in base patch; do
  bin=./build-gpu/fp8jit
  [ $v = patch ] && bin=/tmp/fp8jit-sass-patch/fp8jit
  FP8JIT_CACHE_DIR=/tmp/fp8jit-sass-cache-$v $bin compile --spec "$spec" --cubin "$OUT/$v.cubin" > /dev/null || exit 1
  cuobjdump -sass "$OUT/$v.cubin" | grep -E '^\s+/\*[0-9a-f]{4}\*/' | sed -E 's/ +/ /g; s/;.*$//' > "$OUT/$v.sass"
  awk '/QGMMA/ && !s {s=1} s {print}' "$OUT/$v.sass" > "$OUT/$v.loop.sass"
  printf '%-6s %5d instructions: QGMMA %d, BAR.SYNC %d, BAR.ARV %d, WARPGROUP.DEPBAR %d, WARPGROUP.ARRIVE %d, FFMA %d, LDS %d, SYNCS %d\n' \
    $v "$(wc -l < "$OUT/$v.sass")" "$(grep -c QGMMA "$OUT/$v.sass")" "$(grep -c 'BAR.SYNC' "$OUT/$v.sass")" \
    "$(grep -c 'BAR.ARV' "$OUT/$v.sass")" "$(grep -c 'WARPGROUP.DEPBAR' "$OUT/$v.sass")" \
    "$(grep -c 'WARPGROUP.ARRIVE' "$OUT/$v.sass")" "$(grep -c FFMA "$OUT/$v.sass")" "$(grep -c 'LDS' "$OUT/$v.sass")" \
    "$(grep -c 'SYNCS' "$OUT/$v.sass")"
done
