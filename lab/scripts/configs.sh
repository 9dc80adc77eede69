#!/usr/bin/env bash
# Times chosen gemm configs on the GPU through `fp8jit gemm --config` (checked against the float64
# reference, L2 flushed, median), for comparing tile choices shape by shape before a heuristic
# change. Each line of LIST: M N K SCALE [CONFIG-JSON] (no JSON: the runtime's own choice).
# Usage (repo root, on a Hopper machine): bash lab/scripts/configs.sh LIST [BUILD_DIR]   -> markdown rows
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
list=${1:?usage: bash lab/scripts/configs.sh LIST [BUILD_DIR]}
B=${2:-build-gpu}
export FP8JIT_CACHE_DIR=${FP8JIT_CACHE_DIR:-/tmp/fp8jit-cache}
source lab/scripts/ab_common.sh  # gemm_args
echo "| M | N | K | scale | config | kernel | µs | TFLOP/s | check |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
while read -r m n k scale config; do
  [ -z "$m" ] || [ "${m:0:1}" = "#" ] && continue
  gemm_args "$m" "$n" "$k" "$scale"  # SCALE's suffixes: lab/scripts/ab_common.sh
  [ -n "$config" ] && args+=(--config "$config")
  line=$("$B/fp8jit" "${args[@]}" 2>&1 | tail -1)
  # "<kernel> [MxNxK] on <gpu>: 0.123 ms, 456.7 TFLOP/s, relative error ... (within 4e-03)"
  kernel=${line%% *}
  ms=$(sed -n 's/.*: \([0-9.]*\) ms,.*/\1/p' <<< "$line")
  tf=$(sed -n 's/.* ms, \([0-9.]*\) TFLOP.*/\1/p' <<< "$line")
  check=$(sed -n 's/.*(\(within\|ABOVE\) .*/\1/p' <<< "$line")
  if [ -n "$ms" ]; then
    us=$(awk -v ms="$ms" 'BEGIN { printf "%.1f", ms * 1000 }')
    echo "| $m | $n | $k | $scale | ${config:-default} | $kernel | $us | $tf | $check |"
  else
    echo "| $m | $n | $k | $scale | ${config:-default} | error: ${line:0:150} | | | |"
  fi
done < "$list"
