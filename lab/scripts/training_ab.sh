#!/usr/bin/env bash
# A kernel or heuristic patch on FP8 training, in one device call: the patched build's GPU tests
# (GTESTS), then, given a LIST, lab/scripts/configs.sh over it on the tree's CLI, then the FFN
# benchmark (bench/training/ffn_bench.py, fp8jit's eager rows only) on the tree's and the patched
# Python module by turns, width by width, joined per recipe by lab/scripts/training_ab_join.py.
# Usage (repo root, on the device; carry .carry/sqlite): OUT=... bash lab/scripts/training_ab.sh PATCH [LIST]
# Environment: DIMS (default 4096,8192), RECIPES (default every recipe), GTESTS (a gtest filter,
# default 'GemmGpu.TallTiles*'; empty skips), LIMIT_S (default 585). Writes $OUT/check.log,
# $OUT/gtests.txt, $OUT/configs.md, $OUT/ffn_{tree,patch}_D.json and $OUT/training_ab.md.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT=${OUT:?set OUT to the output folder}
patch=${1-}
list=${2:-}
# Bad arguments stop the call before anything is written.
[ -n "$patch" ] && [ -f "$patch" ] || { echo "training_ab.sh: PATCH '${patch:0:200}': no such file" >&2; exit 2; }
patch -p1 --dry-run -s -f < "$patch" > /dev/null 2>&1 ||
  { echo "training_ab.sh: PATCH '$patch' does not apply to this tree" >&2; exit 2; }
[ -z "$list" ] || [ -f "$list" ] || { echo "training_ab.sh: LIST '${list:0:200}': no such file" >&2; exit 2; }
dims=${DIMS:-4096,8192}
[[ $dims =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "training_ab.sh: DIMS='${dims:0:200}': widths, e.g. 4096,8192" >&2; exit 2; }
source lab/scripts/ab_common.sh  # sqlite_args, call_log, step, left, wait_builds, ab_patch_tree, time_configs
call_log || exit 1
name=$(basename "$patch" .patch)
src=/tmp/fp8jit-ab-src/$name
pb=/tmp/fp8jit-ab-build/$name
ab_patch_tree "$patch" || { step "$patch does not apply"; exit 1; }
py=$(command -v python3)
pyargs=(-DCMAKE_BUILD_TYPE=Release -DFP8JIT_BUILD_PYTHON=ON -DFP8JIT_BUILD_BENCH=OFF -DPython_EXECUTABLE="$py"
  "${sqlite_args[@]}")
cliargs=(-DCMAKE_BUILD_TYPE=Release -DFP8JIT_BUILD_BENCH=OFF "${sqlite_args[@]}")
j=$(($(nproc) / 4 > 0 ? $(nproc) / 4 : 1))
step "builds on $(nproc) cores: both Python modules, $name's GPU tests, the tree's CLI"
pids=()
(cmake -S . -B build-py "${pyargs[@]}" && cmake --build build-py -j$j --target _fp8jit) > /tmp/ta_tree_py.log 2>&1 &
pids+=(tree_py:$!)
(rm -rf "$pb-py" && cmake -S "$src" -B "$pb-py" "${pyargs[@]}" && cmake --build "$pb-py" -j$j --target _fp8jit) \
  > /tmp/ta_patch_py.log 2>&1 &
pids+=(patch_py:$!)
(rm -rf "$pb" && cmake -S "$src" -B "$pb" "${cliargs[@]}" && cmake --build "$pb" -j$j --target fp8jit_gpu_tests) \
  > /tmp/ta_patch_tests.log 2>&1 &
pids+=(patch_tests:$!)
(cmake -S . -B build-gpu "${cliargs[@]}" && cmake --build build-gpu -j$j --target fp8jit_cli) > /tmp/ta_tree_cli.log 2>&1 &
pids+=(tree_cli:$!)
status=0
wait_builds ta_ "${pids[@]}" || status=1
step "builds done (status $status)"
[ $status = 0 ] || exit 1

filter=${GTESTS-GemmGpu.TallTiles*}
if [ -n "$filter" ]; then
  step "$name GPU tests '$filter'"
  timeout "$(($(left) / 3))" "$pb/tests/fp8jit_gpu_tests" --gtest_filter="$filter" > "$OUT/gtests.txt" 2>&1
  rc=$?
  grep -E '^\[  (PASSED|FAILED) |^\[  FAILED  \]' "$OUT/gtests.txt" | tail -8
  step "GPU tests rc $rc$([ $rc = 124 ] && echo ' (cut by the time limit)')"
fi

# Both builds read the tree's shipped tuning rows: the patched copy's module would not find them.
export FP8JIT_SHIPPED_TUNING=$PWD/share/fp8jit/tuning
if [ -n "$list" ] && [ "$(left)" -gt 120 ]; then
  time_configs "$list" "$(($(left) / 3))"
fi

recipes=${RECIPES:-tensorwise,rowwise,delayed,blockwise}
IFS=, read -ra widths <<< "$dims"
for d in "${widths[@]}"; do
  for v in tree patch; do
    [ "$(left)" -gt 30 ] || { step "no time left for d = $d on $v"; continue; }
    pp=build-py/python
    [ $v = patch ] && pp=$pb-py/python
    step "FFN d = $d, $v"
    PYTHONPATH=$pp FP8JIT_CACHE_DIR=/tmp/ta-cache-$v timeout "$(left)" python3 bench/training/ffn_bench.py \
      --dims "$d" --recipes "$recipes" --no-peers --eager-only --out "$OUT/ffn_${v}_$d.json" \
      > "/tmp/ta_ffn_${v}_$d.txt" 2>&1 || { step "FFN d = $d on $v failed:"; tail -5 "/tmp/ta_ffn_${v}_$d.txt"; }
  done
done
python3 lab/scripts/training_ab_join.py "$OUT" | tee "$OUT/training_ab.md"
step "end"
