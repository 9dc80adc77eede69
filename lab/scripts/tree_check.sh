#!/usr/bin/env bash
# The first device call of a session: is the tree as it is correct on the GPU, and where does it
# stand against its peers? Builds build-gpu (GPU tests, CLI), build-peers (libfp8jit.so) and
# DeepGEMM 2.6.1's extension at once, then the GPU tests (GTESTS), then the peers benchmark
# (bench/peers/run.sh) with the time left. Returns $OUT/check.log (each step, its time, a failed
# build's tail), $OUT/gpu.txt, $OUT/gtests.txt, $OUT/peers/gemm_peers.{md,csv}, $OUT/peers/run.log
# and, when asked, $OUT/first_call.md, $OUT/memcheck.txt and $OUT/pytest.txt: ask for two of those
# three at most, as the device tool brings back eight files.
# Usage (repo root, on the device): OUT=... bash lab/scripts/tree_check.sh
# Environment: GTESTS (gtest filter, default 'GemmGpu.*:GroupedGemmGpu.*'; empty skips the tests),
# LIMIT_S (seconds the whole call may take, default 585: under the device tool's 600),
# PEERS=0 skips the peers; PEERS_COMMIT (the commit the report names; default .carry/commit);
# FIRST_CALL=1: every default kernel's first call, cold and from the disk cache, and its SASS
# (lab/probes/first_call.py); MEMCHECK=1: tests/gpu/memcheck.sh; PYTESTS=1: the Python package's
# tests, GPU ones included (tests/gpu/python-on-gpu.sh, its pytest summary in $OUT/pytest.txt).
# They run before the peers, whose reserve (PEERS_RESERVE_S, default 150) then grows by 90 s,
# 100 s and 150 s.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT=${OUT:?set OUT to the output folder}
source lab/scripts/ab_common.sh  # sqlite_args, call_log
call_log || exit 1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv > "$OUT/gpu.txt"
jobs=$(nproc)

step "builds (build-gpu, build-peers, DeepGEMM 2.6.1) on $jobs cores"
(cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFP8JIT_BUILD_BENCH=OFF "${sqlite_args[@]}" &&
  cmake --build build-gpu -j"$jobs" --target fp8jit_gpu_tests fp8jit_cli) > /tmp/tree_check_gpu.log 2>&1 &
gpu_pid=$!
(cmake -S . -B build-peers -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release -DFP8JIT_BUILD_TESTS=OFF \
  -DFP8JIT_BUILD_BENCH=OFF "${sqlite_args[@]}" &&
  cmake --build build-peers -j"$((jobs / 2))" --target fp8jit_shared) > /tmp/tree_check_peers.log 2>&1 &
peers_pid=$!
bash bench/peers/build_deepgemm2.sh .carry/deepgemm2 > /tmp/tree_check_dg2.log 2>&1 &
dg2_pid=$!
status=0
if ! wait "$gpu_pid"; then
  step "build-gpu failed:"; tail -30 /tmp/tree_check_gpu.log; status=1
fi
step "build-gpu done"

if [ $status = 0 ] && [ -n "${GTESTS-GemmGpu.*:GroupedGemmGpu.*}" ]; then
  filter=${GTESTS-GemmGpu.*:GroupedGemmGpu.*}
  # The peers need about two minutes: the tests get what is left before that.
  reserve=${PEERS_RESERVE_S:-150}
  [ "${FIRST_CALL:-0}" = 1 ] && reserve=$((reserve + 90))
  [ "${MEMCHECK:-0}" = 1 ] && reserve=$((reserve + 100))
  [ "${PYTESTS:-0}" = 1 ] && reserve=$((reserve + 150))
  budget=$(($(left) - reserve))
  [ "${PEERS:-1}" = 0 ] && budget=$(left)
  step "GPU tests '$filter' within ${budget} s"
  timeout "$budget" ./build-gpu/tests/fp8jit_gpu_tests --gtest_filter="$filter" > "$OUT/gtests.txt" 2>&1
  rc=$?
  grep -E '^\[  (PASSED|FAILED) |^\[==========\]|^\[  FAILED  \]' "$OUT/gtests.txt" | tail -12
  step "GPU tests rc $rc$([ $rc = 124 ] && echo ' (cut by the time limit)')"
  [ $rc = 0 ] || status=1
fi

wait "$peers_pid" || { step "build-peers failed:"; tail -30 /tmp/tree_check_peers.log; }
# Every build is done before the first calls compile: their NVRTC times are the host's at rest.
wait "$dg2_pid"; tail -1 /tmp/tree_check_dg2.log
if [ "${FIRST_CALL:-0}" = 1 ]; then
  step "first calls of the default kernels (cold, disk cache, SASS)"
  CUDA_CACHE_DISABLE=1 timeout 120 python3 lab/probes/first_call.py --lib build-peers/libfp8jit.so \
    --out "$OUT/first_call.md" > /tmp/tree_check_first_call.log 2>&1
  rc=$?
  tail -4 "$OUT/first_call.md" 2>/dev/null || tail -5 /tmp/tree_check_first_call.log
  step "first calls rc $rc"
  [ $rc = 0 ] || status=1
fi
if [ "${MEMCHECK:-0}" = 1 ] && [ -x build-gpu/fp8jit ]; then
  step "memcheck"
  timeout 150 bash tests/gpu/memcheck.sh build-gpu > "$OUT/memcheck.txt" 2>&1
  rc=$?
  cat "$OUT/memcheck.txt"
  step "memcheck rc $rc"
  [ $rc = 0 ] || status=1
fi
if [ "${PYTESTS:-0}" = 1 ]; then
  step "Python package tests"
  OUT=/tmp/tree_check_py timeout 150 bash tests/gpu/python-on-gpu.sh > /tmp/tree_check_py.log 2>&1
  rc=$?
  tail -3 /tmp/tree_check_py.log
  cp /tmp/tree_check_py/pytest.txt "$OUT/pytest.txt" 2>/dev/null
  step "Python package tests rc $rc"
  [ $rc = 0 ] || status=1
fi
if [ "${PEERS:-1}" != 0 ] && [ "$(left)" -gt 30 ]; then
  commit=${PEERS_COMMIT:-$(cat .carry/commit 2>/dev/null || git rev-parse HEAD 2>/dev/null || echo unknown)}
  step "peers (commit $commit) within $(left) s"
  FP8JIT_CACHE_DIR=/tmp/tree-check-cache PEERS_COMMIT=$commit BUILD_DIR=build-peers \
    timeout "$(left)" bash bench/peers/run.sh "$OUT/peers" > /dev/null 2>&1
  step "peers rc $?"
  rm -f "$OUT/peers/gemm_peers.json"  # the md and csv hold its table; the file count is limited
  grep -E "^(deepseek_v3|open_models) " "$OUT/peers/run.log" | tail -6
fi
step "end"
exit $status
