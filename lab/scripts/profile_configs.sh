#!/usr/bin/env bash
# Nsight Compute on chosen gemm configs, run through `fp8jit gemm --config` (lab/scripts/configs.sh's
# runner): speed of light, memory workload (L2, shared memory incl. the wgmmas' wavefronts and
# bank conflicts), scheduler and warp-state statistics of one launch each. For asking why one
# tile runs slower than another, or than cuBLASLt's (lab/scripts/profile.sh profiles the defaults and
# cuBLASLt's kernel). Each ITEM: "M N K SCALE [CONFIG-JSON]" (a line of a configs list).
# Usage (repo root, Hopper machine, build-gpu built): bash lab/scripts/profile_configs.sh ITEM...
#   BUILD_DIR (default build-gpu), OUT (default /tmp/fp8jit-profile); one log per item, summary.txt.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
B=${BUILD_DIR:-build-gpu}
OUT=${OUT:-/tmp/fp8jit-profile}
mkdir -p "$OUT"
export FP8JIT_CACHE_DIR=${FP8JIT_CACHE_DIR:-/tmp/fp8jit-cache}
source lab/scripts/ncu_common.sh  # ncu_sections, ncu_gmma_metrics, ncu_summary_lines
metrics=$ncu_gmma_metrics,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_gmma.sum
metrics+=,sm__cycles_elapsed.avg.per_second,gpu__time_duration.sum
summary=$OUT/summary.txt
: > "$summary"
i=0
for item in "$@"; do
  read -r m n k scale config <<< "$item"
  args=(gemm --m "$m" --n "$n" --k "$k" --scale "$scale" --iters 3)
  [ -n "$config" ] && args+=(--config "$config")
  log=$OUT/item$((i += 1)).log
  # The third launch of the kernel: past the first (cold instruction cache, TMA descriptors).
  ncu --clock-control none -k regex:^fp8jit_gemm\$ --launch-skip 2 -c 1 --print-units base \
    "${ncu_sections[@]}" --section MemoryWorkloadAnalysis --metrics "$metrics" "./$B/fp8jit" "${args[@]}" \
    > "$log" 2>&1
  {
    echo "== $item"
    grep -E "Throughput|Busy|Active Warps|No Eligible|Bank|L2 Hit|Mem Pipes|SM Frequency|$ncu_summary_lines" "$log" | head -40
  } >> "$summary"
done
cat "$summary"
