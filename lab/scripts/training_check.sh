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
# $OUT/check.log, gtests.txt, configs.md, pytest.txt, ffn.{txt,json}.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT=${OUT:?set OUT to the output folder}
list=${1:-}
# Bad arguments stop the call before anything is written.
[ -z "$list" ] || [ -f "$list" ] || { echo "training_check.sh: LIST '${list:0:200}': no such file" >&2; exit 2; }
dims=${DIMS:-2048,4096,8192,16384}
[[ $dims =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "training_check.sh: DIMS='${dims:0:200}': widths, e.g. 4096,8192" >&2; exit 2; }
[[ ${LIST_S:-120} =~ ^[0-9]{1,3}$ ]] && [ "${LIST_S:-120}" -ge 1 ] && [ "${LIST_S:-120}" -le 600 ] ||
  { echo "training_check.sh: LIST_S='${LIST_S:0:50}': seconds, 1 to 600 (a device call's limit)" >&2; exit 2; }
case ${FFN:-1} in 0 | 1) ;; *) echo "training_check.sh: FFN='${FFN:0:50}': 0 or 1" >&2; exit 2 ;; esac
source lab/scripts/ab_common.sh  # sqlite_args, call_log, step, left, wait_builds
call_log || exit 1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv
j=$(($(nproc) / 2 > 0 ? $(nproc) / 2 : 1))
py=$(command -v python3)
step "builds on $(nproc) cores: the Python module, the CLI and the GPU tests"
(cmake -S . -B build-py -DCMAKE_BUILD_TYPE=Release -DFP8JIT_BUILD_PYTHON=ON -DFP8JIT_BUILD_BENCH=OFF \
  -DPython_EXECUTABLE="$py" "${sqlite_args[@]}" && cmake --build build-py -j$j --target _fp8jit) > /tmp/tc_py.log 2>&1 &
py_pid=$!
(cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFP8JIT_BUILD_BENCH=OFF "${sqlite_args[@]}" &&
  cmake --build build-gpu -j$j --target fp8jit_cli fp8jit_gpu_tests) > /tmp/tc_cli.log 2>&1 &
cli_pid=$!
site=/tmp/fp8jit-torchao-site
if ls .carry/wheels-torchao/torchao-*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
    .carry/wheels-torchao/*.whl > /tmp/tc_pip.log 2>&1 || step "torchao did not install: $(tail -1 /tmp/tc_pip.log)"
fi
python3 -c "import pytest" 2> /dev/null ||
  python3 -m pip install -q --no-index --find-links .carry/wheels pytest > /tmp/tc_pytest_pip.log 2>&1
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
if [ -n "$list" ]; then
  step "configs $list within ${LIST_S:-120} s"
  FP8JIT_CACHE_DIR=/tmp/tc-cli-cache timeout "${LIST_S:-120}" bash lab/scripts/configs.sh "$list" build-gpu \
    > "$OUT/configs.md" 2>&1
  step "configs rc $? ($(grep -c '^| [0-9]' "$OUT/configs.md") lines)"
fi
export PYTHONPATH=build-py/python:$site FP8JIT_CACHE_DIR=/tmp/tc-py-cache
if [ "${PYTEST:-1}" != 0 ]; then
  step "python/tests/test_training.py"
  timeout "$(($(left) / 3))" python3 -m pytest -q -p no:cacheprovider -rs ${PYTEST_K:+-k "$PYTEST_K"} \
    python/tests/test_training.py > "$OUT/pytest.txt" 2>&1
  rc=$?
  tail -6 "$OUT/pytest.txt"
  step "pytest rc $rc"
  [ $rc = 0 ] || status=1
fi
if [ "${FFN:-1}" != 0 ]; then
  step "FFN benchmark, d = $dims, within $(left) s"
  PYTHONUNBUFFERED=1 timeout "$(left)" python3 bench/training/ffn_bench.py --dims "$dims" --out "$OUT/ffn.json" \
    > "$OUT/ffn.txt" 2>&1 || status=1
  grep -v '^{' "$OUT/ffn.txt" | grep -v Warning | tail -40
fi
step "end (status $status)"
exit "$status"
