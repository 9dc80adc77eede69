#!/usr/bin/env bash
# One shape under Nsight Compute for fp8jit (an explicit config through `fp8jit gemm`) and
# DeepGEMM 2.6.1 (its own heuristic, through bench/peers/gemm_peers.py), the same sections for
# both: speed of light, memory workload, warp states, launch statistics and the per-SASS source
# counters, so that two kernels of the same tile can be compared instruction by instruction.
# Usage (repo root, Hopper, `fp8jit` and libfp8jit.so built in BUILD_DIR; DeepGEMM 2.6.1
# is built here as bench/peers/run.sh builds it, once per machine):
#   OUT=... bash lab/probes/ncu_peer_pair.sh M N K SCALE [CONFIG-JSON]
# Writes per provider: NAME.txt (details page), NAME.stalls.txt (top stalled instructions),
# NAME.csv.gz (the source page), NAME.ncu.log; all of them packed into $OUT/pair.tgz at the end
# (the device tool returns at most 8 files), the loose copies removed unless KEEP=1.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
m=$1 n=$2 k=$3 scale=$4 config=${5:-}
B=${BUILD_DIR:-build-gpu}
OUT=${OUT:-/tmp/fp8jit-peer-pair}
mkdir -p "$OUT"
export FP8JIT_CACHE_DIR=${FP8JIT_CACHE_DIR:-/tmp/fp8jit-cache} DG_JIT_CACHE_DIR=${DG_JIT_CACHE_DIR:-/tmp/deepgemm-cache}
sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats
  --section SchedulerStats --section LaunchStats --section Occupancy --section SourceCounters
  --metrics smsp__inst_executed.sum,sm__cycles_active.avg,sm__pipe_tensor_op_gmma_cycles_active.avg,lts__t_bytes.sum,dram__bytes_read.sum)
report() {  # name
  ncu -i "/tmp/$1.ncu-rep" --print-units base > "$OUT/$1.txt" 2>&1
  ncu -i "/tmp/$1.ncu-rep" --page source --csv --print-source sass > "/tmp/$1.csv" 2>&1
  python3 lab/probes/top_stalls.py "/tmp/$1.csv" 60 > "$OUT/$1.stalls.txt" 2>&1
  gzip -c "/tmp/$1.csv" > "$OUT/$1.csv.gz"
}
args=(gemm --m "$m" --n "$n" --k "$k" --scale "$scale" --iters 3)
[ -n "$config" ] && args+=(--config "$config")
name=fp8jit_${m}x${n}x${k}_$scale
"./$B/fp8jit" "${args[@]}" | tail -1
timeout 200 ncu --clock-control none --cache-control all -k regex:^fp8jit_gemm\$ --launch-skip 2 -c 1 --print-units base \
  "${sections[@]}" -o "/tmp/$name" -f "./$B/fp8jit" "${args[@]}" > "$OUT/$name.ncu.log" 2>&1
report "$name"
name=deepgemm2_${m}x${n}x${k}_$scale
bash bench/peers/build_deepgemm2.sh .carry/deepgemm2 > "$OUT/deepgemm2_build.log" 2>&1  # once per machine
list=open-models
grep -q "^$m,$n,$k\b" bench/shapes/deepseek_v3.csv && list=deepseek-v3
timeout 240 ncu --clock-control none --cache-control all -k regex:sm90_fp8_gemm --launch-skip 1 -c 1 --print-units base \
  "${sections[@]}" -o "/tmp/$name" -f python3 bench/peers/gemm_peers.py --lib "$B/libfp8jit.so" --out /tmp/pair-peers \
  --lists "$list" --only "${m}x${n}x${k}" --scales "$scale" --providers deepgemm2 --iters 2 --warmup 1 \
  --deepgemm2 .carry/deepgemm2 > "$OUT/$name.ncu.log" 2>&1
report "$name"
grep -E "Duration|Elapsed Cycles|SM Frequency|Registers Per|Grid Size|Executed Ipc A|Memory Throughput|DRAM Throughput|L2 Cache Throughput" \
  "$OUT"/fp8jit_${m}x${n}x${k}_$scale.txt "$OUT"/deepgemm2_${m}x${n}x${k}_$scale.txt
tar czf "$OUT/pair.tgz" -C "$OUT" $(cd "$OUT" && ls | grep -v '^pair.tgz$')
[ "${KEEP:-0}" = 1 ] || (cd "$OUT" && ls | grep -v '^pair.tgz$' | xargs rm -f)
