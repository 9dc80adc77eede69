#!/usr/bin/env bash
# Per-SASS-instruction profile of chosen gemm configs: Nsight Compute's SourceCounters (warp stall
# samples and executed instructions per instruction) on the third launch of `fp8jit gemm`, its
# source page as CSV (gzipped) and the top stalled instructions (lab/probes/top_stalls.py). For
# asking where a kernel's instructions and cycles go, line by line.
# Usage (repo root, Hopper, build built): OUT=... bash lab/probes/source_profile.sh "M N K SCALE [CONFIG]"...
#   BUILD_DIR (default build-gpu).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
B=${BUILD_DIR:-build-gpu}
OUT=${OUT:-/tmp/fp8jit-source-profile}
mkdir -p "$OUT"
export FP8JIT_CACHE_DIR=${FP8JIT_CACHE_DIR:-/tmp/fp8jit-cache}
i=0
for item in "$@"; do
  read -r m n k scale config <<< "$item"
  args=(gemm --m "$m" --n "$n" --k "$k" --scale "$scale" --iters 3)
  [ -n "$config" ] && args+=(--config "$config")
  name=src$((i += 1))_${m}x${n}x${k}_$scale
  "./$B/fp8jit" "${args[@]}" > "$OUT/$name.run.txt" 2>&1
  timeout 240 ncu --clock-control none -k regex:^fp8jit_gemm\$ --launch-skip 2 -c 1 --print-units base \
    --section SourceCounters --section WarpStateStats --section SpeedOfLight --metrics smsp__inst_executed.sum \
    -o "/tmp/$name" -f "./$B/fp8jit" "${args[@]}" > "$OUT/$name.ncu.log" 2>&1
  ncu -i "/tmp/$name.ncu-rep" --print-units base > "$OUT/$name.txt" 2>&1
  ncu -i "/tmp/$name.ncu-rep" --page source --csv --print-source sass > "/tmp/$name.csv" 2>&1
  python3 lab/probes/top_stalls.py "/tmp/$name.csv" 60 > "$OUT/$name.stalls.txt" 2>&1
  gzip -c "/tmp/$name.csv" > "$OUT/$name.csv.gz"
  echo "$item: $(tail -1 "$OUT/$name.run.txt")"
done
