#!/usr/bin/env bash
# One device call for a kernel patch: is it correct on the GPU, and what does it do at the
# runtime's own choices on both shape lists, timed by the profiler? Builds at once the tree
# (build-gpu: CLI; build-peers: libfp8jit.so), the patched copy (CLI, GPU tests, libfp8jit.so)
# and DeepGEMM 2.6.1; runs the patched tree's GPU tests (GTESTS); then bench/peers/run.sh on the
# patched library with the tree's as gemm_peers.py's --lib-base (both timed in each shape's
# profiling window; PEERS_RUNS=2: one run per library instead, the peers' move between the runs
# the noise floor), joined per line by lab/scripts/peers_ab.py; then, with the time left,
# lab/scripts/variants.sh on LIST. Returns at most eight files: $OUT/check.log, $OUT/gtests.txt,
# $OUT/peers/gemm_peers.{md,csv} (PEERS_RUNS=2: $OUT/{patch,tree}/...), $OUT/peers_ab.md, $OUT/configs.md and
# $OUT/variants.md.
# Usage (repo root, on the device): OUT=... bash lab/scripts/patch_check.sh PATCH [LIST]
# LIST_RESERVE_S: seconds kept from the GPU tests for LIST (default 0).
# Environment: GTESTS (gtest filter run on the patched build; empty skips), LIMIT_S (default 585),
# PEERS=0 skips the peers, PEERS_ARGS (extra gemm_peers.py options, e.g. "--lists open-models"),
# MORE="NAME=PATCH ..." further variants for LIST (built beside the others, CLI only),
# CONFIGS=FILE lab/scripts/configs.sh over FILE (explicit tiles timed side by side, the tree's CLI,
# so a heuristic patch's old and new tile meet in one run) after the peers, CONFIGS_S seconds kept
# for it (default 120) -> $OUT/configs.md. PEERS_RESERVE_S: seconds the GPU tests leave for the
# peers (default 200; both lists take ~90 s once DeepGEMM's JIT cache is warm, so a short call
# with few tests can lower it).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT=${OUT:?set OUT to the output folder}
patch=${1-}
list=${2:-}
# Bad arguments stop the call before anything is written.
[ -n "$patch" ] || { echo "usage: OUT=... bash lab/scripts/patch_check.sh PATCH [LIST]" >&2; exit 2; }
[ -f "$patch" ] || { echo "patch_check.sh: PATCH '$patch': no such file" >&2; exit 2; }
source lab/scripts/ab_common.sh  # call_seconds, sqlite_args, call_log, wait_builds, ab_patch_tree, time_configs
configs=${CONFIGS:-}
[ -z "$configs" ] || [ -f "$configs" ] || { echo "patch_check.sh: CONFIGS '${configs:0:200}': no such file" >&2; exit 2; }
configs_s=${CONFIGS_S:-120}
call_seconds "$configs_s" ||
  { echo "patch_check.sh: CONFIGS_S='${configs_s:0:50}': seconds, 1 to 600 (a device call's limit)" >&2; exit 2; }
[ -n "$configs" ] || configs_s=0
peers_reserve=${PEERS_RESERVE_S-200}  # set but empty is refused, not taken as the default
call_seconds "$peers_reserve" ||
  { echo "patch_check.sh: PEERS_RESERVE_S='${peers_reserve:0:50}': seconds, 1 to 600 (a device call's limit)" >&2; exit 2; }
patch -p1 --dry-run -s -f < "$patch" > /dev/null 2>&1 ||
  { echo "patch_check.sh: PATCH '$patch' does not apply to this tree" >&2; exit 2; }
[ -z "$list" ] || [ -f "$list" ] || { echo "patch_check.sh: LIST '$list': no such file" >&2; exit 2; }
case ${PEERS_RUNS:-1} in 1 | 2) ;; *) echo "patch_check.sh: PEERS_RUNS='$PEERS_RUNS': 1 or 2" >&2; exit 2 ;; esac
call_log || exit 1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv
jobs=$(nproc)
name=$(basename "$patch" .patch)
src=/tmp/fp8jit-ab-src/$name
pb=/tmp/fp8jit-ab-build/$name
ab_patch_tree "$patch" || { step "$patch does not apply"; exit 1; }

step "builds (tree, $name, DeepGEMM 2.6.1) on $jobs cores"
(cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFP8JIT_BUILD_BENCH=OFF "${sqlite_args[@]}" &&
  cmake --build build-gpu -j"$((jobs / 3))" --target fp8jit_cli) > /tmp/pc_tree.log 2>&1 &
tree_pid=$!
peers_pid= dg2_pid=
[ "${PEERS:-1}" != 0 ] && (cmake -S . -B build-peers -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release -DFP8JIT_BUILD_TESTS=OFF \
  -DFP8JIT_BUILD_BENCH=OFF "${sqlite_args[@]}" &&
  cmake --build build-peers -j"$((jobs / 4))" --target fp8jit_shared) > /tmp/pc_peers.log 2>&1 &
[ "${PEERS:-1}" != 0 ] && peers_pid=$!
(rm -rf "$pb" && cmake -S "$src" -B "$pb" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release -DFP8JIT_BUILD_BENCH=OFF \
  "${sqlite_args[@]}" &&
  cmake --build "$pb" -j"$((jobs / 2))" --target fp8jit_cli fp8jit_gpu_tests fp8jit_shared) > /tmp/pc_patch.log 2>&1 &
patch_pid=$!
if [ "${PEERS:-1}" != 0 ]; then
  bash bench/peers/build_deepgemm2.sh .carry/deepgemm2 > /tmp/pc_dg2.log 2>&1 &
  dg2_pid=$!
fi
more_pid=
if [ -n "${MORE:-}" ] && [ -n "$list" ]; then
  # shellcheck disable=SC2086
  OUT=/tmp/pc-more BUILD_ONLY=1 bash lab/scripts/variants.sh "$list" $MORE > /tmp/pc_more.log 2>&1 &
  more_pid=$!
fi
status=0
wait_builds pc_ tree:$tree_pid peers:$peers_pid patch:$patch_pid || status=1
[ -z "$more_pid" ] || wait "$more_pid" || { step "build of MORE failed:"; tail -30 /tmp/pc_more.log /tmp/pc-more/*.build.log; }
[ -z "$dg2_pid" ] || { wait "$dg2_pid"; tail -1 /tmp/pc_dg2.log; }
step "builds done (status $status)"
[ $status = 0 ] || exit 1

if [ -n "${GTESTS-GemmGpu.*:GroupedGemmGpu.*}" ]; then
  filter=${GTESTS-GemmGpu.*:GroupedGemmGpu.*}
  reserve=$peers_reserve
  [ "${PEERS:-1}" = 0 ] && reserve=0
  budget=$(($(left) - reserve - configs_s))
  [ -n "$list" ] && budget=$((budget - ${LIST_RESERVE_S:-0}))
  step "$name GPU tests '$filter' within $budget s"
  timeout "$budget" "$pb/tests/fp8jit_gpu_tests" --gtest_filter="$filter" > "$OUT/gtests.txt" 2>&1
  rc=$?
  grep -E '^\[  (PASSED|FAILED) |^\[==========\]|^\[  FAILED  \]' "$OUT/gtests.txt" | tail -12
  step "GPU tests rc $rc$([ $rc = 124 ] && echo ' (cut by the time limit)')"
fi

commit=$(cat .carry/commit 2>/dev/null || git rev-parse HEAD 2>/dev/null || echo unknown)
# Each library reads its tree's shipped tuning rows: a patched copy's library would not find them
# beside it and would run the heuristic where the tree's ran a tuned row.
if [ "${PEERS:-1}" != 0 ] && [ "${PEERS_RUNS:-1}" = 1 ] && [ "$(($(left) - configs_s))" -gt 60 ]; then
  # One process: the tree's library as gemm_peers.py's --lib-base, timed in each shape's
  # profiling window beside the patched one, so the run's drift falls on both alike.
  step "peers, patch and tree in one run, within $(($(left) - configs_s)) s"
  # shellcheck disable=SC2086
  FP8JIT_SHIPPED_TUNING=$src/share/fp8jit/tuning FP8JIT_CACHE_DIR=/tmp/pc-cache-patch \
    PEERS_COMMIT="$commit+$name" BUILD_DIR=$pb timeout "$(($(left) - configs_s))" bash bench/peers/run.sh "$OUT/peers" \
    --lib-base "$PWD/build-peers/libfp8jit.so" --shipped-base "$PWD/share/fp8jit/tuning" \
    --base-title "fp8jit tree" ${PEERS_ARGS:-} > /dev/null 2>&1
  step "peers rc $?"
  rm -f "$OUT/peers/gemm_peers.json" "$OUT/peers/run.log"
  # The tree's library timed on some line, else (it did not load or run) one run per library.
  if [ -f "$OUT/peers/gemm_peers.csv" ] && python3 -c 'import csv, sys
sys.exit(not any(r.get("fp8jit_base_status") == "ok" for r in csv.DictReader(open(sys.argv[1]))))' \
    "$OUT/peers/gemm_peers.csv"; then
    python3 lab/scripts/peers_ab.py "$OUT/peers/gemm_peers.csv" > "$OUT/peers_ab.md"
  else
    step "no line timed with the tree's library in one process: one run per library instead"
    rm -rf "$OUT/peers"
    PEERS_RUNS=2
  fi
fi
# PEERS_RUNS=2: one run per library, the patched one first (the DeepGEMM kernels it compiles are
# cached for the tree's run); the peers' move between the runs is then the noise floor.
for v in patch tree; do
  [ "${PEERS:-1}" = 0 ] || [ "${PEERS_RUNS:-1}" = 1 ] && break
  lib=build-peers shipped=$PWD/share/fp8jit/tuning
  [ $v = patch ] && lib=$pb shipped=$src/share/fp8jit/tuning
  [ "$(left)" -gt 60 ] || { step "no time left for peers on $v"; continue; }
  step "peers on $v within $(left) s"
  # shellcheck disable=SC2086
  FP8JIT_SHIPPED_TUNING=$shipped FP8JIT_CACHE_DIR=/tmp/pc-cache-$v PEERS_COMMIT="$commit+$([ $v = patch ] && echo "$name" || echo tree)" \
    BUILD_DIR=$lib timeout "$(left)" bash bench/peers/run.sh "$OUT/$v" ${PEERS_ARGS:-} > /dev/null 2>&1
  step "peers on $v rc $?"
  rm -f "$OUT/$v/gemm_peers.json" "$OUT/$v/run.log"
done
if [ -f "$OUT/patch/gemm_peers.csv" ] && [ -f "$OUT/tree/gemm_peers.csv" ]; then
  python3 lab/scripts/peers_ab.py "$OUT/tree/gemm_peers.csv" "$OUT/patch/gemm_peers.csv" > "$OUT/peers_ab.md"
fi
[ -f "$OUT/peers_ab.md" ] && sed -n '1,/^| list | M/p' "$OUT/peers_ab.md" | head -14

[ -n "$configs" ] && [ "$(left)" -gt 20 ] && time_configs "$configs" "$(left)"

if [ -n "$list" ] && [ "$(left)" -gt 60 ]; then
  step "variants $list within $(left) s"
  mkdir -p /tmp/pc-variants
  OUT=/tmp/pc-variants PREBUILT=1 timeout "$(left)" bash lab/scripts/variants.sh "$list" base=- "$name=$patch" ${MORE:-} \
    > /tmp/pc-variants/stdout.txt 2>&1
  cp /tmp/pc-variants/variants.md "$OUT/variants.md" 2>/dev/null
  step "variants rc $?"
fi
step "end"
