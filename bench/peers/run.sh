#!/usr/bin/env bash
# The peer GEMM benchmark in one command, on a Hopper machine with torch and CUDA: builds the
# shared libfp8jit.so if needed (BUILD_DIR, default build-peers: its own CMake tree, tests and
# benchmarks off), builds DeepGEMM 2.6.1's extension in .carry/deepgemm2 if that tree is there and
# not built yet, then runs bench/peers/gemm_peers.py once (one process): fp8jit (C ABI via ctypes),
# DeepGEMM v1 (.carry/deepgemm), DeepGEMM 2.6.1 (.carry/deepgemm2) and cuBLASLt (torch._scaled_mm)
# on the same inputs, both shape lists, block / tensor / tensor-fast scaling.
#
# Usage (any directory): bash bench/peers/run.sh [OUT_DIR] [gemm_peers.py options...]
#   OUT_DIR   results (default $OUT, else bench/results/peers-<date>): gemm_peers.{md,csv,json}
#             and run.log (this script's whole output)
#   e.g.      bash bench/peers/run.sh /tmp/p --only 64x2112x7168,4096x7168x2048 --iters 10
# Environment: BUILD_DIR; PEERS_COMMIT (the commit the report names, where the tree's .git is not its own);
# FP8JIT_CACHE_DIR (default /tmp/fp8jit-peers-cache: a fresh cache and no tuning database, so
# fp8jit runs the tuned rows shipped for this GPU in share/fp8jit/tuning where there are any, else
# its heuristic's kernels; FP8JIT_DB names a database consulted first, FP8JIT_SHIPPED_TUNING=off
# leaves the shipped rows out);
# DG_JIT_CACHE_DIR (default /tmp/deepgemm-cache, both DeepGEMMs); CUDA_HOME (default /usr/local/cuda);
# DEEPGEMM2_DIR (default .carry/deepgemm2: bench/peers/setup_deepgemm2.py lays it out; a failed
# build leaves DeepGEMM 2.6.1 unavailable in the report, the rest runs).
# Exit status: 0 all correct, 1 build or set-up failed, 2 some result flagged or a peer unavailable.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
out_dir=${OUT:-bench/results/peers-$(date +%F)}
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then out_dir=$1; shift; fi
mkdir -p "$out_dir" || exit 1
out_dir=$(cd "$out_dir" && pwd)
exec > >(tee "$out_dir/run.log") 2>&1
tee_pid=$!
finish() { exec 1>&- 2>&-; wait "$tee_pid" 2>/dev/null; exit "$1"; }
step() { echo "=== $* ($(date +%T))"; }

B=${BUILD_DIR:-build-peers}
export FP8JIT_CACHE_DIR=${FP8JIT_CACHE_DIR:-/tmp/fp8jit-peers-cache}
export DG_JIT_CACHE_DIR=${DG_JIT_CACHE_DIR:-/tmp/deepgemm-cache}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
[ -x "$CUDA_HOME/bin/nvcc" ] && export DG_JIT_NVCC_COMPILER=${DG_JIT_NVCC_COMPILER:-$CUDA_HOME/bin/nvcc}
export PATH="$CUDA_HOME/bin:$PATH" PYTHONUNBUFFERED=1

if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "run.sh: no NVIDIA GPU here (nvidia-smi fails); the peer benchmark needs a Hopper GPU" >&2
  finish 1
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv

step "build libfp8jit.so ($B)"
t0=$(date +%s)
# Makefiles: Ninja refuses this project (the CLI's output name "fp8jit" is also an interface target).
if [ -f "$B/CMakeCache.txt" ] && ! grep -q "^CMAKE_GENERATOR:INTERNAL=Unix Makefiles" "$B/CMakeCache.txt"; then
  rm -rf "$B"
fi
if [ ! -f "$B/CMakeCache.txt" ]; then
  cfg=(-G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release -DFP8JIT_BUILD_TESTS=OFF -DFP8JIT_BUILD_BENCH=OFF)
  if [ ! -f /usr/include/sqlite3.h ] && [ -f .carry/sqlite/sqlite3.h ]; then
    # A machine with the SQLite runtime but no headers: the header travels with the tree.
    lib=$(ls /lib/x86_64-linux-gnu/libsqlite3.so* /usr/lib/x86_64-linux-gnu/libsqlite3.so* 2>/dev/null | head -1)
    cfg+=(-DSQLite3_INCLUDE_DIR="$PWD/.carry/sqlite" -DSQLite3_LIBRARY="${lib:-/lib/x86_64-linux-gnu/libsqlite3.so.0}")
  fi
  cmake -S . -B "$B" "${cfg[@]}" > /tmp/peers-cmake.log 2>&1 || { tail -40 /tmp/peers-cmake.log; finish 1; }
fi
cmake --build "$B" -j"$(nproc)" --target fp8jit_shared > /tmp/peers-build.log 2>&1 || { tail -60 /tmp/peers-build.log; finish 1; }
[ -f "$B/libfp8jit.so" ] || { echo "run.sh: $B/libfp8jit.so missing after the build" >&2; finish 1; }
echo "built in $(( $(date +%s) - t0 )) s: $(readlink -f "$B/libfp8jit.so")"

# DeepGEMM 2.6.1's torch extension, built in place once (a failure leaves that peer unavailable;
# gemm_peers.py says why).
dg2=${DEEPGEMM2_DIR:-.carry/deepgemm2}
step "DeepGEMM 2.6.1 extension ($dg2)"
bash bench/peers/build_deepgemm2.sh "$dg2"

step "gemm_peers.py -> $out_dir"
python3 bench/peers/gemm_peers.py --lib "$B/libfp8jit.so" --out "$out_dir" --deepgemm2 "$dg2" "$@"
rc=$?
step "done (status $rc)"
ls -l "$out_dir"
finish $rc
