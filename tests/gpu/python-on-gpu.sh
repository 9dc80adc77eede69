#!/usr/bin/env bash
# The Python package on a Hopper machine: builds the nanobind module for the python3 on PATH (the
# one with torch) into build-py, then runs python/tests (the GPU tests included) with pytest.
# Usage (repo root): bash tests/gpu/python-on-gpu.sh      Logs: $OUT (default /tmp/fp8jit-py)
# CLIENTS=1 also runs python/tests/host_overhead.py and both clients in python/examples.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/fp8jit-py}
mkdir -p "$OUT"
py=$(command -v python3)
sqlite_args=()
if [ ! -f /usr/include/sqlite3.h ] && [ -f .carry/sqlite/sqlite3.h ]; then
  sqlite_args=(-DSQLite3_INCLUDE_DIR="$PWD/.carry/sqlite" -DSQLite3_LIBRARY=/lib/x86_64-linux-gnu/libsqlite3.so.0)
fi
echo "=== build ($py)"
cmake -S . -B build-py -DCMAKE_BUILD_TYPE=Release -DFP8JIT_BUILD_PYTHON=ON -DFP8JIT_BUILD_BENCH=OFF \
  -DPython_EXECUTABLE="$py" "${sqlite_args[@]}" > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
cmake --build build-py -j"$(nproc)" --target _fp8jit > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
[ "${PYTEST:-1}" = 0 ] && exit 0  # PYTEST=0: only the build
if ! "$py" -c "import pytest" 2>/dev/null; then
  # No package registry on the GPU machine: pytest's wheels travel in .carry/wheels (lab/README.md).
  "$py" -m pip install -q --no-index --find-links .carry/wheels pytest > "$OUT/pip.log" 2>&1 ||
    { echo "pytest is not installed and not in .carry/wheels"; tail -5 "$OUT/pip.log"; exit 1; }
fi
echo "=== pytest"
# A tuning database of its own: the tune tests store rows and read them back.
# Fresh each run unless given: the database keeps the faster of an old and a new winner, so a
# warm machine's earlier run would answer for the shapes the tests tune.
[ -n "${FP8JIT_DB:-}" ] || rm -f /tmp/fp8jit-py-tune.db /tmp/fp8jit-py-tune.db-wal /tmp/fp8jit-py-tune.db-shm
export FP8JIT_CACHE_DIR=${FP8JIT_CACHE_DIR:-/tmp/fp8jit-py-cache} FP8JIT_DB=${FP8JIT_DB:-/tmp/fp8jit-py-tune.db} \
  PYTHONPATH=build-py/python
"$py" -m pytest -q -p no:cacheprovider -rs python/tests 2>&1 | tee "$OUT/pytest.txt" | tail -40
status=${PIPESTATUS[0]}
if [ "${CLIENTS:-0}" = 1 ]; then
  # The host cost per call and both real clients (python/examples), each with its own log.
  # The Hub kernel transformers 5 loads, where a copy travelled (the GPU machine reaches no Hub).
  hub=()
  [ -d .carry/hf-kernels/finegrained_fp8 ] && hub=(--hub-kernel .carry/hf-kernels)
  for run in "host_overhead:python/tests/host_overhead.py" "deepseek_v3:python/examples/deepseek_v3_client.py" \
             "hf_fp8:python/examples/hf_fp8_client.py"; do
    echo "=== ${run%%:*}"
    args=()
    [ "${run%%:*}" = hf_fp8 ] && args=("${hub[@]}")
    timeout 300 "$py" "${run#*:}" "${args[@]}" > "$OUT/${run%%:*}.txt" 2>&1; echo "exit $?" >> "$OUT/${run%%:*}.txt"
    tail -12 "$OUT/${run%%:*}.txt"
  done
fi
exit "$status"
