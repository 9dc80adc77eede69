#!/usr/bin/env bash
# Where a tile's cycles go, fp8jit against DeepGEMM v1: lab/patches/exp_tile_timeline.patch
# instruments fp8jit's gemm kernel (per consumer warpgroup, summed over its tiles: the first
# full-barrier wait of each tile, the other waits, the turn barrier, the K loop, column-half
# stores inside it, the time between one tile's K loop and the next tile's start; the producer's
# empty-barrier waits and per-stage phases; marks from the kernel's first instruction: the
# producer's entry and first TMA issue, consumer wg0's start and first full stage; each CTA's start
# and end by %globaltimer) and prints one line per launch
# (FP8JIT_TL=1, L2 flushed after each); lab/probes/timeline_deepgemm.py does the same to
# DeepGEMM v1's kernel. Cycles are SM clocks (%clock); span_us is the launch's first CTA start
# to its last CTA end.
# Usage (repo root, Hopper): OUT=... bash lab/probes/tile_timeline.sh
#   ITEMS: lines "M N K SCALE [CONFIG-JSON]" for fp8jit (default below); DG_SHAPES: "M,N,K ..." ("":
#   none); TL_PATCHES: further patches, applied in order after the timeline's (where they touch
#   its code, written against the patched lines).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT=${OUT:-/tmp/fp8jit-timeline}
mkdir -p "$OUT"
source lab/scripts/ab_common.sh  # sqlite_args, ab_patch_tree
t0=$SECONDS
cat lab/patches/exp_tile_timeline.patch ${TL_PATCHES:-} > /tmp/exp_tile_timeline.patch
ab_patch_tree /tmp/exp_tile_timeline.patch || { echo "patch does not apply"; exit 1; }
src=/tmp/fp8jit-ab-src/exp_tile_timeline B=/tmp/fp8jit-timeline-build
(cmake -S "$src" -B "$B" -DCMAKE_BUILD_TYPE=Release -DFP8JIT_BUILD_TESTS=OFF "${sqlite_args[@]}" &&
  cmake --build "$B" -j"$(nproc)" --target fp8jit_cli) > "$OUT/build.log" 2>&1 ||
  { tail -20 "$OUT/build.log"; exit 1; }
echo "built at $((SECONDS - t0)) s"
ITEMS=${ITEMS:-"4096 4096 7168 block
4096 4096 7168 block {\"block_m\":128,\"block_n\":128,\"stages\":5}
4096 24576 1536 block
4096 24576 1536 block {\"block_m\":128,\"block_n\":256,\"stages\":3}
4096 7168 2048 block
4096 5120 25600 block
8192 8192 8192 block
4096 4096 7168 tensor"}
export FP8JIT_CACHE_DIR=/tmp/fp8jit-timeline-cache FP8JIT_TL=1
while read -r m n k scale config; do
  [ -z "$m" ] && continue
  args=(gemm --m "$m" --n "$n" --k "$k" --scale "$scale" --iters 3)
  [ -n "$config" ] && args+=(--config "$config")
  echo "== fp8jit $m $n $k $scale ${config:-default}"
  timeout 120 "$B/fp8jit" "${args[@]}" > "$OUT/run.txt" 2>&1
  grep -v "^TL" "$OUT/run.txt" | tail -3
  grep "^TL" "$OUT/run.txt" | tail -3
done <<< "$ITEMS"
echo "fp8jit done at $((SECONDS - t0)) s"
DG_SHAPES=${DG_SHAPES:-"4096,4096,7168 4096,24576,1536 4096,7168,2048 4096,5120,25600 8192,8192,8192"}
# shellcheck disable=SC2086
[ -n "$DG_SHAPES" ] && timeout 300 python3 lab/probes/timeline_deepgemm.py .carry/deepgemm $DG_SHAPES 2>&1 | grep -E "call [345]|Error|error" | tail -40
echo "done at $((SECONDS - t0)) s"
