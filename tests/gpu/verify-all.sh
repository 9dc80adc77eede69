#!/usr/bin/env bash
# The product's GPU checks in one or two device calls, each step under its own time limit so that a
# call cut short still returns the logs of the steps before it. Steps (in order, any subset):
#   build    build-gpu (CLI, GPU tests, bench, examples) and build-py (the nanobind module) at once
#   tests    tests/gpu/run-on-gpu.sh quick: GPU tests, torch cross-check, demo, SASS checks
#   serving  tests/gpu/serving-on-gpu.sh: model warm-up, 8 processes on one cache, FP8JIT_JIT=off
#   python   tests/gpu/python-on-gpu.sh with CLIENTS=1: pytest, host cost per call, both clients
#   cast     tests/gpu/cast-on-gpu.sh: fp8jit cast against DeepSeek-V3's fp8_cast_bf16.py
#   ue8m0    lab/probes/deepseek_ue8m0.py: how kernel.py's Triton rounds scales to powers of two
#   gtests   the GPU tests matching GTESTS (a gtest filter, default RuntimeGpu.*) on build-gpu
#   pyprobes lab/probes/py_host_cost.py: where fp8jit.gemm's host time goes
#   pip      `pip install ./python` (offline: --no-build-isolation --no-index) into a scratch folder,
#            then tests/gpu/first_call_latency.py through it after `fp8jit precompile --model`
# Usage (repo root, on the device): bash tests/gpu/verify-all.sh "build tests serving"
# Every step's logs go under $OUT/<step>/ and are packed into $OUT/logs.tar.gz (the device hands back
# a few files only); a summary of each step is printed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/fp8jit-verify}
STEPS=${1:-build tests serving python cast}
LIMIT=${STEP_LIMIT:-400}
work=/tmp/fp8jit-verify-logs
mkdir -p "$work"
status=0
run_step() {  # name, command...
  local name=$1 t0=$SECONDS rc
  shift
  mkdir -p "$work/$name"
  echo "=== $name ($(date +%T))"
  OUT=$work/$name timeout "$LIMIT" "$@" > "$work/$name/stdout.txt" 2>&1
  rc=$?
  tail -n "${TAIL:-30}" "$work/$name/stdout.txt"
  echo "=== $name: exit $rc in $((SECONDS - t0)) s"
  [ "$rc" = 0 ] || status=1
}
build_both() {
  OUT=$OUT/gpu bash tests/gpu/run-on-gpu.sh build-only &
  local gpu=$!
  # build-py builds the library a second time for the Python module: both at once use all cores.
  (OUT=$OUT/py PYTEST=0 bash tests/gpu/python-on-gpu.sh) &
  local py=$!
  wait $gpu || return 1
  wait $py
}
pip_and_latency() {
  local target=/tmp/fp8jit-pip sqlite=()
  [ -f /usr/include/sqlite3.h ] || sqlite=(--config-settings=cmake.define.SQLite3_INCLUDE_DIR="$PWD/.carry/sqlite"
    --config-settings=cmake.define.SQLite3_LIBRARY=/lib/x86_64-linux-gnu/libsqlite3.so.0)
  rm -rf "$target"
  echo "=== pip install ./python"
  CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install -q --no-build-isolation --no-index --target "$target" \
    "${sqlite[@]}" ./python > "$OUT/pip.log" 2>&1 || { tail -30 "$OUT/pip.log"; return 1; }
  # fp8jit imported before torch, as a user may write it.
  PYTHONPATH=$target python3 -c "import fp8jit, torch; q, s = fp8jit.quantize(torch.randn(256, 512, \
device='cuda', dtype=torch.bfloat16)); print('installed', fp8jit.__file__, tuple(q.shape), q.dtype)" || return 1
  echo "=== first calls after the warm-up (DeepSeek-V3, tp=8)"
  source tests/gpu/build-cli.sh latency || return 1
  local cache=/tmp/fp8jit-latency-cache
  rm -rf "$cache"
  FP8JIT_CACHE_DIR=$cache FP8JIT_DB=$cache/db.sqlite ./$B/fp8jit precompile --model bench/models/deepseek-v3.json \
    --m 1-4096 --tp 8 | tail -1
  FP8JIT_JIT=off FP8JIT_CACHE_DIR=$cache FP8JIT_DB=$cache/db.sqlite PYTHONPATH=$target \
    python3 tests/gpu/first_call_latency.py
}
for step in $STEPS; do
  case $step in
    build) run_step build bash -c "$(declare -f build_both); build_both" ;;
    tests) run_step tests bash tests/gpu/run-on-gpu.sh quick ;;
    serving) run_step serving bash tests/gpu/serving-on-gpu.sh ;;
    python) run_step python env CLIENTS=1 bash tests/gpu/python-on-gpu.sh ;;
    cast) run_step cast bash tests/gpu/cast-on-gpu.sh ;;
    ue8m0) run_step ue8m0 python3 lab/probes/deepseek_ue8m0.py ;;
    gtests) run_step gtests ./build-gpu/tests/fp8jit_gpu_tests --gtest_brief=1 --gtest_filter="${GTESTS:-RuntimeGpu.*}" ;;
    pip) run_step pip bash -c "$(declare -f pip_and_latency); pip_and_latency" ;;
    pyprobes) run_step pyprobes env PYTHONPATH=build-py/python python3 lab/probes/py_host_cost.py ;;
    *) echo "unknown step '$step' (build tests serving python cast)"; status=1 ;;
  esac
done
mkdir -p "$OUT"
tar -czf "$OUT/logs.tar.gz" -C "$work" . && echo "logs: $OUT/logs.tar.gz"
exit "$status"
