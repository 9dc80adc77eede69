#!/usr/bin/env bash
# Nsight Compute profile of fp8jit's gemm kernel and cuBLASLt's on a few shapes, same metrics for
# both: duration, tensor-pipe activity, L2 and DRAM throughput, warp stalls. Answers "what bounds
# this shape" before an optimisation is chosen (lab/NOTES-log.md cites the tables).
#
# Usage (repo root, Hopper machine, fp8jit_bench built): bash lab/scripts/profile.sh "M,N,K:scale ..."
#   e.g. bash lab/scripts/profile.sh "4096,32768,512:tensor 128,4096,7168:tensor"
#   BUILD_DIR (default build-gpu), OUT (default /tmp/fp8jit-profile); one log per shape and provider.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
B=${BUILD_DIR:-build-gpu}
OUT=${OUT:-/tmp/fp8jit-profile}
mkdir -p "$OUT"
bench=./$B/bench/fp8jit_bench
export FP8JIT_CACHE_DIR=${FP8JIT_CACHE_DIR:-/tmp/fp8jit-cache}
metrics=gpu__time_duration.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed
metrics+=,lts__t_sectors.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum.per_second
metrics+=,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum
metrics+=,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,sm__cycles_elapsed.avg.per_second,launch__grid_size,launch__registers_per_thread
source lab/scripts/ncu_common.sh  # ncu_sections, ncu_gmma_metrics, ncu_summary_lines
metrics+=,$ncu_gmma_metrics
summary=$OUT/summary.txt
: > "$summary"
# Metric names vary between ncu versions: drop the tensor-pipe one where this ncu lacks it.
if ! ncu --query-metrics --chip gh100 2>/dev/null | grep -q '^sm__pipe_tensor_op_gmma_cycles_active'; then
  echo "no sm__pipe_tensor_op_gmma_cycles_active here; gmma-like metrics:" >> "$summary"
  ncu --query-metrics --chip gh100 2>/dev/null | grep -i gmma | head -10 >> "$summary"
  metrics=${metrics/,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed/}
fi

profile() {  # name, filter options (one string), shape csv, scale, provider
  # shellcheck disable=SC2086
  ncu --clock-control none $2 --metrics "$metrics" "${ncu_sections[@]}" --print-units base \
    "$bench" --benchmark_filter=^Gemm/ --shapes="$3" --scales="$4" --providers="$5" > "$OUT/$1.log" 2>&1
  {
    echo "== $1"
    grep -E "^  [^ ]|gpu__time|lts__|dram__|sm__cycles|launch__|$ncu_summary_lines" "$OUT/$1.log" | head -50
  } >> "$summary"
}

for item in "$@"; do
  shape=${item%%:*} scale=${item##*:}
  tag=$(echo "${shape}_$scale" | tr ',' 'x')
  csv=$OUT/$tag.csv
  printf 'm,n,k\n%s\n' "$shape" > "$csv"
  profile "fp8jit_$tag" "-k regex:^fp8jit_gemm\$ --launch-skip 2 -c 1" "$csv" "$scale" fp8jit
  # cuBLASLt's kernel: the third launch of the longest-running kernel that is not fp8jit's (its
  # launch index, so that no name has to survive a regex).
  ncu --clock-control none --metrics gpu__time_duration.sum -c 60 "$bench" --benchmark_filter=^Gemm/ \
    --shapes="$csv" --scales="$scale" --providers=cublaslt > "$OUT/names_$tag.log" 2>&1
  skip=$(awk '/^  [^ ]/{name=$0; n++} /gpu__time_duration.sum/{print n - 1 "\t" $NF "\t" name}' \
    "$OUT/names_$tag.log" | grep -v $'\t  fp8jit_' | python3 -c '
import sys, collections
rows = [l.rstrip("\n").split("\t") for l in sys.stdin if l.strip()]
total = collections.Counter()
for i, t, n in rows: total[n] += float(t)
if total:
    top = total.most_common(1)[0][0]
    idx = [int(i) for i, t, n in rows if n == top]
    print(idx[min(2, len(idx) - 1)])')
  echo "cuBLASLt launch index for $tag: ${skip:-<none found>}" >> "$summary"
  [ -n "$skip" ] && profile "cublaslt_$tag" "--launch-skip $skip -c 1" "$csv" "$scale" cublaslt
done
cat "$summary"
