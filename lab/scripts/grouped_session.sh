#!/usr/bin/env bash
# One device call for grouped (mixture-of-experts) GEMM work, most useful first:
#   1. build build-gpu (GPU tests, CLI) and build-peers (libfp8jit.so for the Python peers) side by side
#   2. GPU tests matching GTESTS (default GroupedGemmGpu.*), and compute-sanitizer memcheck of
#      MEMCHECK (a gtest filter, default empty: skipped)
#   3. bench/peers/grouped_peers.py against DeepGEMM v1 (.carry/deepgemm) and, where laid out,
#      2.6.1 (.carry/deepgemm2, its extension built in step 1) — QUICK=1 (default) six
#      cases, QUICK=0 the MoE suite; ONLY="contiguous:8:4096 ..." restricts the cases
#   4. with NCU="LAYOUT:G:ROWS", Nsight Compute of that case's kernels (fp8jit grouped, the dense
#      loop, DeepGEMM's): duration, SM and memory throughput, warp stalls
#   5. EXTRA: a command run last (e.g. a GPU smoke script), its output in $OUT/extra.txt
# With AB_PATCH=PATCH and PROBE_CASES (lines as lab/probes/grouped_probe.sh takes them), a copy of
# the tree with PATCH applied is built beside the others, and right after the builds the probe
# times the tree, the patched copy and the tree again (the two tree runs bound the noise).
# SRC_TAR=.carry/head.tar.gz (from `git archive -o .carry/head.tar.gz HEAD`) builds and runs that
# tree instead of the working tree the device got (which may hold someone's unfinished edits).
# Usage (repo root, on the device): OUT=$OUT bash lab/scripts/grouped_session.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT=${OUT:-/tmp/fp8jit-grouped}
mkdir -p "$OUT"
if [ -n "${SRC_TAR:-}" ]; then
  src=/tmp/fp8jit-src
  rm -rf "$src" && mkdir -p "$src" && tar -xzf "$SRC_TAR" -C "$src" || exit 1
  ln -s "$PWD/.carry" "$src/.carry"
  cd "$src" || exit 1
fi
log() { echo "=== $* ($(date +%T))" | tee -a "$OUT/session.txt"; }
source lab/scripts/ab_common.sh  # sqlite_args
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export FP8JIT_CACHE_DIR=${FP8JIT_CACHE_DIR:-/tmp/fp8jit-cache}
export DG_JIT_CACHE_DIR=${DG_JIT_CACHE_DIR:-/tmp/deepgemm-cache}
[ -x "$CUDA_HOME/bin/nvcc" ] && export DG_JIT_NVCC_COMPILER=${DG_JIT_NVCC_COMPILER:-$CUDA_HOME/bin/nvcc}

log "build"
ab_pid=
if [ -n "${AB_PATCH:-}" ]; then
  ab_src=/tmp/fp8jit-ab-probe
  rm -rf "$ab_src" && mkdir -p "$ab_src" &&
    tar -c --exclude='./build*' --exclude=./.carry --exclude=./.git . | tar -x -C "$ab_src" &&
    patch -s -p1 -d "$ab_src" < "$AB_PATCH" || { echo "AB_PATCH $AB_PATCH does not apply"; exit 1; }
  (cmake -S "$ab_src" -B "$ab_src/build" -DCMAKE_BUILD_TYPE=Release -DFP8JIT_BUILD_TESTS=OFF "${sqlite_args[@]}" &&
    cmake --build "$ab_src/build" -j4 --target fp8jit_shared) > "$OUT/build-ab.log" 2>&1 &
  ab_pid=$!
fi
# DeepGEMM 2.6.1 (.carry/deepgemm2, when laid out) joins the grouped peers: its extension builds
# beside the rest.
dg2_pid=
if [ -f .carry/deepgemm2/setup.py ]; then
  bash bench/peers/build_deepgemm2.sh .carry/deepgemm2 > "$OUT/build-deepgemm2.log" 2>&1 &
  dg2_pid=$!
fi
(cmake -S . -B build-peers -DCMAKE_BUILD_TYPE=Release -DFP8JIT_BUILD_TESTS=OFF "${sqlite_args[@]}" &&
  cmake --build build-peers -j6 --target fp8jit_shared) > "$OUT/build-peers.log" 2>&1 &
peers_pid=$!
{ cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release "${sqlite_args[@]}" &&
  cmake --build build-gpu -j10 --target fp8jit_gpu_tests fp8jit_cli; } > "$OUT/build-gpu.log" 2>&1
gpu_rc=$?
wait $peers_pid
peers_rc=$?
log "build exit: build-gpu $gpu_rc, build-peers $peers_rc"
[ $gpu_rc = 0 ] || tail -30 "$OUT/build-gpu.log"
[ $peers_rc = 0 ] || tail -30 "$OUT/build-peers.log"

if [ -n "$ab_pid" ]; then
  wait $ab_pid || { echo "patched build failed"; tail -20 "$OUT/build-ab.log"; }
  if [ $peers_rc = 0 ] && [ -f "$ab_src/build/libfp8jit.so" ]; then
    log "probe: tree, $AB_PATCH, tree"
    for lib in build-peers "$ab_src/build" build-peers; do
      echo "== $lib" | tee -a "$OUT/probe_ab.txt"
      LIB=$lib OUT="$OUT/probe" timeout 300 bash lab/probes/grouped_probe.sh 2>&1 | tee -a "$OUT/probe_ab.txt"
    done
  fi
fi

if [ $gpu_rc = 0 ] && [ "${GTESTS-GroupedGemmGpu.*}" != "" ]; then
  log "GPU tests ${GTESTS-GroupedGemmGpu.*}"
  ./build-gpu/tests/fp8jit_gpu_tests --gtest_filter="${GTESTS-GroupedGemmGpu.*}" --gtest_brief=1 > "$OUT/gtests.txt" 2>&1
  log "GPU tests exit $?"
  tail -15 "$OUT/gtests.txt"
fi
if [ $gpu_rc = 0 ] && [ -n "${MEMCHECK:-}" ]; then
  log "memcheck $MEMCHECK"
  compute-sanitizer --tool memcheck --leak-check no --error-exitcode 3 \
    ./build-gpu/tests/fp8jit_gpu_tests --gtest_filter="$MEMCHECK" --gtest_brief=1 > "$OUT/memcheck.txt" 2>&1
  log "memcheck exit $?"
  grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.txt" | tail -8
fi

only=()
for c in ${ONLY:-}; do only+=(--only "$c"); done
dg2_args=()
if [ -n "$dg2_pid" ]; then
  wait "$dg2_pid" && dg2_args=(--deepgemm2 .carry/deepgemm2) || tail -5 "$OUT/build-deepgemm2.log"
fi
if [ $peers_rc = 0 ] && [ "${BENCH:-1}" != 0 ]; then
  log "grouped peers"
  python3 bench/peers/grouped_peers.py --lib build-peers/libfp8jit.so --deepgemm .carry/deepgemm "${dg2_args[@]}" \
    $([ "${QUICK:-1}" = 1 ] && echo --quick) "${only[@]}" > "$OUT/grouped_peers.md" 2> "$OUT/grouped_peers.err"
  log "grouped peers exit $?"
  cat "$OUT/grouped_peers.md"
  tail -5 "$OUT/grouped_peers.err"
fi

if [ $peers_rc = 0 ] && [ -n "${NCU:-}" ]; then
  log "ncu $NCU"
  source lab/scripts/ncu_common.sh  # ncu_sections, ncu_summary_lines
  metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum
  metrics+=,dram__bytes_read.sum,launch__grid_size,launch__registers_per_thread,sm__throughput.avg.pct_of_peak_sustained_elapsed
  ncu --clock-control none --kernel-name regex:'fp8jit_gemm|fp8_gemm' --launch-count 12 --metrics "$metrics" \
    "${ncu_sections[@]}" --print-units base \
    python3 bench/peers/grouped_peers.py --lib build-peers/libfp8jit.so --deepgemm .carry/deepgemm "${dg2_args[@]}" \
    --only "$NCU" --iters 1 > "$OUT/ncu.log" 2>&1
  log "ncu exit $?"
  grep -E "^  [^ ]|gpu__time|dram__|lts__|launch__|sm__throughput|$ncu_summary_lines" "$OUT/ncu.log" > "$OUT/ncu_summary.txt"
fi

if [ -n "${EXTRA:-}" ]; then
  log "extra: $EXTRA"
  bash -c "$EXTRA" > "$OUT/extra.txt" 2>&1
  log "extra exit $?"
  tail -20 "$OUT/extra.txt"
fi
