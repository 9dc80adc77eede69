#!/usr/bin/env bash
# One device call that does a session's usual GPU work (build once, then everything in order of
# importance, so that a call cut short by its time limit still returns the most useful logs):
#   1. build build-gpu; meanwhile each PATCH's tree builds fp8jit_bench in the background
#   2. GPU tests (tests/gpu/run-on-gpu.sh quick: tests, torch check, demo, SASS checks)
#   3. the GEMM bench on DeepSeek-V3 shapes against cuBLASLt (SCALES, default block,tensor)
#   4. A/B of each patch against the base on AB_SHAPES (default lab/shapes/ab_two.csv)
#   4b. with PATCH_GTESTS set (a gtest filter), those GPU tests on each patch's build
#   4c. with AB_ENVS set (space-separated VAR=VALUE[,VAR=VALUE] variants), lab/scripts/ab_env.sh on
#      AB_SHAPES: the base build run once per setting; ENV_GTESTS (a gtest filter) runs those GPU
#      tests under each setting too
#   4d. with PATCH_BENCH=1 (or the names of some patches, space-separated), the GEMM bench
#      (SCALES) on those patches' builds as well, under $OUT/bench_<patch>: the closing table of
#      a change in the call that A/Bs it
#   5. lab/scripts/configs.sh for each list in CONFIGS (space-separated paths), on the base and on each
#      patch's build (a config the base cannot run reports its error there)
# TESTS=0 skips step 2 (the base is then only built), BENCH=0 step 3: for an exploratory call
# whose results are confirmed by a full one later.
# Usage (repo root, on the device): bash lab/scripts/session.sh [PATCH...]
# Logs under $OUT: tests/, bench/, ab/, and session.txt (the step times).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT=${OUT:-/tmp/fp8jit-session}
mkdir -p "$OUT/tests" "$OUT/bench" "$OUT/ab"
SCALES=${SCALES:-block,tensor}
AB_SHAPES=$(realpath "${AB_SHAPES:-lab/shapes/ab_two.csv}")
AB_SCALES=${AB_SCALES:-block,tensor}
log() { echo "=== $* ($(date +%T))" | tee -a "$OUT/session.txt"; }
source lab/scripts/ab_common.sh  # sqlite_args, ab_patch_tree, ab_gemm_table (writing under $OUT/ab)

# Patched trees build at low priority beside the main build; they outlive nothing (same call).
pids=()
for patch in "$@"; do
  name=$(basename "$patch" .patch)
  src=/tmp/fp8jit-ab-src/$name
  ab_patch_tree "$patch" || { log "$name: patch does not apply"; continue; }
  (nice -n 10 cmake -S "$src" -B "/tmp/fp8jit-ab-build/$name" -DCMAKE_BUILD_TYPE=Release "${sqlite_args[@]}" &&
    nice -n 10 cmake --build "/tmp/fp8jit-ab-build/$name" -j8 --target fp8jit_bench fp8jit_cli \
      ${PATCH_GTESTS:+fp8jit_gpu_tests}) > "$OUT/ab/$name.build.log" 2>&1 &
  pids+=($!)
done

if [ "${TESTS:-1}" != 0 ]; then
  log "GPU tests (build included)"
  OUT=$OUT/tests bash tests/gpu/run-on-gpu.sh quick > "$OUT/tests/run.txt" 2>&1
  log "GPU tests exit $?"
  tail -40 "$OUT/tests/run.txt"
else
  log "build (GPU tests skipped: TESTS=0)"
  { cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release "${sqlite_args[@]}" &&
    cmake --build build-gpu -j"$(nproc)" --target fp8jit_cli fp8jit_bench fp8jit_gpu_tests; } \
    > "$OUT/tests/build.log" 2>&1 || { log "build failed"; tail -30 "$OUT/tests/build.log"; }
fi

# gemm_bench NAME BUILD_DIR OUT_DIR: the DeepSeek-V3 GEMM bench (SCALES) of one build against
# cuBLASLt (the base with the GPU tests' kernel cache, a patch with its own); prints the table,
# or its last TABLE_TAIL lines.
gemm_bench() {
  local cache=/tmp/fp8jit-cache
  [ "$1" = base ] || cache=/tmp/fp8jit-ab-cache/$1
  log "GEMM bench ($SCALES) on $1"
  mkdir -p "$3"
  FP8JIT_CACHE_DIR=$cache "$2/fp8jit" bench --shapes bench/shapes/deepseek_v3.csv \
    --scale "$SCALES" --providers fp8jit,cublaslt --out "$3" > "$3/gemm.txt" 2>&1
  log "GEMM bench on $1 exit $?"
  sed -n '/^GEMM on/,$p' "$3/gemm.txt" | tail -n "${TABLE_TAIL:-+1}"
}

if [ "${BENCH:-1}" != 0 ]; then
  cmake --build build-gpu -j"$(nproc)" --target fp8jit_cli > /dev/null 2>&1
  gemm_bench base build-gpu "$OUT/bench"
fi

[ ${#pids[@]} -gt 0 ] && wait "${pids[@]}"
measure() { OUT=$OUT/ab ab_gemm_table "$1" "$2" "$AB_SHAPES" "$AB_SCALES"; }  # name, build tree
if [ $# -gt 0 ]; then
  log "A/B on $AB_SHAPES ($AB_SCALES)"
  cmake --build build-gpu -j"$(nproc)" --target fp8jit_bench > /dev/null 2>&1
  measure base build-gpu
  for patch in "$@"; do
    name=$(basename "$patch" .patch)
    if [ -x "/tmp/fp8jit-ab-build/$name/bench/fp8jit_bench" ]; then
      measure "$name" "/tmp/fp8jit-ab-build/$name"
    else
      echo "== $name: build failed"; tail -20 "$OUT/ab/$name.build.log"
    fi
  done
  measure base_again build-gpu
fi
if [ -n "${PATCH_GTESTS:-}" ]; then
  for patch in "$@"; do
    name=$(basename "$patch" .patch)
    log "GPU tests $PATCH_GTESTS on $name"
    FP8JIT_CACHE_DIR=/tmp/fp8jit-ab-cache/$name "/tmp/fp8jit-ab-build/$name/tests/fp8jit_gpu_tests" --gtest_brief=1 \
      --gtest_filter="$PATCH_GTESTS" > "$OUT/ab/$name.gpu_tests.log" 2>&1
    echo "exit $?"; tail -3 "$OUT/ab/$name.gpu_tests.log"; grep -E "FAILED|Failure" "$OUT/ab/$name.gpu_tests.log" | head -10
  done
fi
if [ "${PATCH_BENCH:-0}" != 0 ]; then
  for patch in "$@"; do
    name=$(basename "$patch" .patch)
    [ -x "/tmp/fp8jit-ab-build/$name/fp8jit" ] || continue
    [ "$PATCH_BENCH" = 1 ] || [[ " $PATCH_BENCH " == *" $name "* ]] || continue
    TABLE_TAIL=4 gemm_bench "$name" "/tmp/fp8jit-ab-build/$name" "$OUT/bench_$name"
  done
fi
if [ -n "${AB_ENVS:-}" ]; then
  log "A/B of settings $AB_ENVS on $AB_SHAPES ($AB_SCALES)"
  cmake --build build-gpu -j"$(nproc)" --target fp8jit_bench > /dev/null 2>&1
  # shellcheck disable=SC2086  # one word per variant
  OUT=$OUT/ab_env bash lab/scripts/ab_env.sh "$AB_SHAPES" "$AB_SCALES" $AB_ENVS
  if [ -n "${ENV_GTESTS:-}" ]; then
    for variant in $AB_ENVS; do
      name=$(echo "$variant" | tr ',=' '__')
      log "GPU tests $ENV_GTESTS with $variant"
      env FP8JIT_CACHE_DIR=/tmp/fp8jit-env-cache ${variant//,/ } ./build-gpu/tests/fp8jit_gpu_tests --gtest_brief=1 \
        --gtest_filter="$ENV_GTESTS" > "$OUT/ab_env/$name.gpu_tests.log" 2>&1
      echo "exit $?"; tail -3 "$OUT/ab_env/$name.gpu_tests.log"
    done
  fi
fi
for list in ${CONFIGS:-}; do
  log "configs $list"
  bash lab/scripts/configs.sh "$list" build-gpu | tee "$OUT/configs_$(basename "$list" .txt).md"
  for patch in "$@"; do
    name=$(basename "$patch" .patch)
    [ -x "/tmp/fp8jit-ab-build/$name/fp8jit" ] || continue
    echo "== $name"
    bash lab/scripts/configs.sh "$list" "/tmp/fp8jit-ab-build/$name" | tee "$OUT/configs_$(basename "$list" .txt)_$name.md"
  done
done
log "done"
