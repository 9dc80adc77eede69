#!/usr/bin/env bash
# FP8 training on a lent Hopper machine, in one call: build the Python module (build-py), install
# torchao 0.18 from .carry/wheels-torchao (no package registry there) into a scratch folder, run
# python/tests/test_training.py (numerics, autograd, torch.compile, loss curves), then
# bench/training/ffn_bench.py over DIMS. Logs under $OUT (pytest.txt, ffn.txt, ffn.json).
# Usage (repo root, on the device; carry .carry/sqlite and .carry/wheels-torchao):
#   DIMS=2048,4096 bash bench/training/run.sh        (STEPS="tests bench" by default; PYTEST_K: pytest's -k)
# torchao's wheel, on a machine with a registry: python3 -m pip download --no-deps --only-binary=:all:
#   --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 -d .carry/wheels-torchao torchao==0.18.0
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/fp8jit-training}
mkdir -p "$OUT"
status=0
OUT=$OUT/build PYTEST=0 bash tests/gpu/python-on-gpu.sh || exit 1
site=/tmp/fp8jit-torchao-site
if ls .carry/wheels-torchao/torchao-*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
    .carry/wheels-torchao/*.whl > "$OUT/pip.log" 2>&1 || { echo "torchao did not install"; tail -5 "$OUT/pip.log"; }
fi
if ! python3 -c "import pytest" 2>/dev/null; then
  python3 -m pip install -q --no-index --find-links .carry/wheels pytest > "$OUT/pip-pytest.log" 2>&1
fi
export PYTHONPATH=build-py/python:$site FP8JIT_CACHE_DIR=${FP8JIT_CACHE_DIR:-/tmp/fp8jit-training-cache}
for step in ${STEPS:-tests bench}; do
  echo "=== $step ($(date +%T))"
  case $step in
    tests)
      timeout "${TEST_LIMIT:-300}" python3 -m pytest -q -p no:cacheprovider -rs ${PYTEST_K:+-k "$PYTEST_K"} \
        python/tests/test_training.py > "$OUT/pytest.txt" 2>&1 || status=1
      tail -25 "$OUT/pytest.txt" ;;
    bench)
      timeout "${BENCH_LIMIT:-420}" python3 bench/training/ffn_bench.py --dims "${DIMS:-2048,4096}" \
        --out "$OUT/ffn.json" > "$OUT/ffn.txt" 2>&1 || status=1
      grep -v "^{" "$OUT/ffn.txt" | tail -30 ;;
    *) echo "unknown step '$step' (tests bench)"; status=1 ;;
  esac
done
exit "$status"
