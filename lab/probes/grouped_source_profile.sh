#!/usr/bin/env bash
# Per-SASS-instruction profile of a masked grouped case, fp8jit's configs against DeepGEMM 2.6.1's own
# kernel: Nsight Compute's SourceCounters and WarpStateStats on fp8jit's first launch of each config (through
# lab/probes/grouped_configs.cpp, the rows per group drawn as bench/peers/grouped_peers.py draws them,
# constant operands) and on DeepGEMM 2.6.1's first launch of the MoE suite's masked cases of G experts x
# EXPECTED rows (through grouped_peers.py, random operands: their SM clock runs lower, so compare cycles;
# the suite's gate-up case, 4096x7168, comes first). Per kernel: the details page, the source page as
# gzipped CSV and its top stalled instructions (lab/probes/top_stalls.py).
# Usage (repo root, Hopper; builds build-peers and DeepGEMM 2.6.1's extension from .carry/deepgemm2):
#   OUT=... bash lab/probes/grouped_source_profile.sh [G M_MAX EXPECTED N K [CONFIG...]]
# default: 8 1024 256 4096 7168 with 128x192 s4 alone and in pairs along M (open question 0c).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT=${OUT:-/tmp/fp8jit-grouped-source}
mkdir -p "$OUT"
source lab/scripts/ab_common.sh  # sqlite_args
g=${1:-8} m=${2:-1024} e=${3:-256} n=${4:-4096} k=${5:-7168}
shift $(($# < 5 ? $# : 5))
configs=("$@")
[ ${#configs[@]} = 0 ] && configs=('"block_m":128,"block_n":192,"stages":4'
                                   '"block_m":128,"block_n":192,"stages":4,"cluster_m":2')
t0=$SECONDS
bash bench/peers/build_deepgemm2.sh .carry/deepgemm2 > "$OUT/dg2.log" 2>&1 &
dg2=$!
(cmake -S . -B build-peers -DCMAKE_BUILD_TYPE=Release -DFP8JIT_BUILD_TESTS=OFF "${sqlite_args[@]}" &&
  cmake --build build-peers -j12 --target fp8jit_shared) > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
LIB=$PWD/build-peers
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
g++ -std=c++20 -O2 -Iinclude -I"$LIB/generated/include" -I"$CUDA_HOME/include" lab/probes/grouped_configs.cpp \
  -L"$LIB" -lfp8jit -Wl,-rpath,"$LIB" -L"$CUDA_HOME/lib64/stubs" -lcuda -o /tmp/grouped_configs || exit 1
wait $dg2 || tail -5 "$OUT/dg2.log"
echo "built at $((SECONDS - t0)) s"
table=$(python3 -c "import sys, torch; sys.path.insert(0, 'bench/peers'); from grouped_peers import masked_counts
print(' '.join(map(str, masked_counts(torch, $g, $m, $e).tolist())))") || exit 1
export FP8JIT_CACHE_DIR=${FP8JIT_CACHE_DIR:-/tmp/fp8jit-cache} DG_JIT_CACHE_DIR=${DG_JIT_CACHE_DIR:-/tmp/deepgemm-cache}
export CUDA_HOME DG_JIT_NVCC_COMPILER=${DG_JIT_NVCC_COMPILER:-$CUDA_HOME/bin/nvcc}
profile() {  # name, kernel filter, command...
  local name=$1 filter=$2
  shift 2
  timeout 240 ncu --clock-control none -k "$filter" -c 1 --print-units base --section SourceCounters \
    --section WarpStateStats --section SpeedOfLight --metrics smsp__inst_executed.sum,sm__cycles_elapsed.avg \
    -o "/tmp/$name" -f "$@" > "$OUT/$name.ncu.log" 2>&1
  ncu -i "/tmp/$name.ncu-rep" --print-units base > "$OUT/$name.txt" 2>&1
  ncu -i "/tmp/$name.ncu-rep" --page source --csv --print-source sass > "/tmp/$name.csv" 2>&1
  python3 lab/probes/top_stalls.py "/tmp/$name.csv" 60 > "$OUT/$name.stalls.txt" 2>&1
  gzip -c "/tmp/$name.csv" > "$OUT/$name.csv.gz"
  echo "$name ($((SECONDS - t0)) s): $(grep -m1 -E 'Duration' "$OUT/$name.txt")"
}
i=0
for c in "${configs[@]}"; do
  TABLE="$table" profile "fp8jit_$((i += 1))" 'regex:^fp8jit_gemm$' /tmp/grouped_configs masked "$g" "$m" "$e" "$n" "$k" "$c"
done
profile deepgemm2 regex:sm90_fp8_gemm_1d2d python3 bench/peers/grouped_peers.py --lib build-peers/libfp8jit.so \
  --deepgemm2 .carry/deepgemm2 --only "masked:$g:$e" --iters 1
