#!/usr/bin/env bash
# The tree on FP8 training in one device call: builds at once the Python module (build-py), the
# CLI and the GPU tests (build-gpu); the GPU tests GTESTS; lab/scripts/configs.sh over LIST (the
# tiles a heuristic change swaps, explicit configs side by side); python/tests/test_training.py
# with torchao importable (its byte-for-byte cast comparison runs only then); the FFN benchmark
# (bench/training/ffn_bench.py: bf16, the six GEMMs alone, torchao, fp8jit's recipes) over DIMS.
# Each step gets what the call has left; a step cut short keeps what it printed.
# Usage (repo root, on the device; carry .carry with sqlite/ and wheels-torchao/, wheels/ for
# pytest): OUT=... bash lab/scripts/training_check.sh [LIST]
# Environment: GTESTS (default 'GemmGpu.TallTiles*'; empty skips), DIMS (default
# 2048,4096,8192,16384), FFN=0 skips the benchmark, PYTEST=0 skips the tests, PYTEST_K (pytest's
# -k: some of them), LIST_S (default 120: the list's share), LIMIT_S (default 585). Writes
# $OUT/check.log, gtests.txt, configs.md and training/{pytest.txt,ffn.txt,ffn.json}.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT=${OUT:?set OUT to the output folder}
list=${1:-}
# Bad arguments stop the call before anything is written.
[ -z "$list" ] || [ -f "$list" ] || { echo "training_check.sh: LIST '${list:0:200}': no such file" >&2; exit 2; }
dims=${DIMS:-2048,4096,8192,16384}
[[ $dims =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "training_check.sh: DIMS='${dims:0:200}': widths, e.g. 4096,8192" >&2; exit 2; }
source lab/scripts/ab_common.sh  # call_seconds, sqlite_args, call_log, step, left, wait_builds, time_configs
call_seconds "${LIST_S:-120}" ||
  { echo "training_check.sh: LIST_S='${LIST_S:0:50}': seconds, 1 to 600 (a device call's limit)" >&2; exit 2; }
case ${FFN:-1} in 0 | 1) ;; *) echo "training_check.sh: FFN='${FFN:0:50}': 0 or 1" >&2; exit 2 ;; esac
call_log || exit 1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv
# The Python module as bench/training/run.sh builds it (run.sh later finds it built).
step "builds on $(nproc) cores: the Python module, the CLI and the GPU tests"
OUT=/tmp/tc-py PYTEST=0 bash tests/gpu/python-on-gpu.sh > /tmp/tc_py.log 2>&1 &
py_pid=$!
(cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFP8JIT_BUILD_BENCH=OFF "${sqlite_args[@]}" &&
  cmake --build build-gpu -j"$(nproc)" --target fp8jit_cli fp8jit_gpu_tests) > /tmp/tc_cli.log 2>&1 &
cli_pid=$!
status=0
wait_builds tc_ py:$py_pid cli:$cli_pid || status=1
step "builds done (status $status)"
[ $status = 0 ] || exit 1

filter=${GTESTS-GemmGpu.TallTiles*}
if [ -n "$filter" ]; then
  step "GPU tests '$filter'"
  timeout "$(($(left) / 4))" build-gpu/tests/fp8jit_gpu_tests --gtest_filter="$filter" > "$OUT/gtests.txt" 2>&1
  rc=$?
  grep -E '^\[  (PASSED|FAILED) |^\[==========\]|^\[  FAILED  \]' "$OUT/gtests.txt" | tail -8
  step "GPU tests rc $rc$([ $rc = 124 ] && echo ' (cut by the time limit)')"
  [ $rc = 0 ] || status=1
fi
[ -z "$list" ] || time_configs "$list" "${LIST_S:-120}"
# The training tests (with torchao from .carry/wheels-torchao) and the FFN benchmark, as
# bench/training/run.sh runs them, in what the call has left: a third for the tests, the rest but
# 20 s for the benchmark.
steps=()
[ "${PYTEST:-1}" = 0 ] || steps+=(tests)
[ "${FFN:-1}" = 0 ] || steps+=(bench)
[ ${#steps[@]} = 0 ] || [ "$(left)" -gt 60 ] || { step "no time left for ${steps[*]}"; steps=(); status=1; }
if [ ${#steps[@]} -gt 0 ]; then
  step "bench/training/run.sh: ${steps[*]}, d = $dims, within $(left) s"
  OUT=$OUT/training STEPS="${steps[*]}" DIMS=$dims TEST_LIMIT=$(($(left) / 3)) BENCH_LIMIT=$(($(left) * 2 / 3 - 20)) \
    bash bench/training/run.sh || status=1
  rm -rf "$OUT/training/build" "$OUT/training/pip.log"  # build logs: the device call returns 8 files
fi
step "end (status $status)"
exit "$status"
