#!/usr/bin/env bash
# compute-sanitizer memcheck over the CLI's quantize and GEMM paths on small ragged shapes (every
# tile edge, each scale mode, fp32 out) and split-K summed inside clusters (distributed shared
# memory). Prints each run's error summary; exits 1 if any run failed or reported an error.
# Usage (repo root, on a GPU machine): bash tests/gpu/memcheck.sh [BUILD_DIR]   (default build-gpu)
set -uo pipefail
B=${1:-build-gpu}
[ -x "$B/fp8jit" ] || { echo "memcheck.sh: $B/fp8jit: not built (cmake --build $B --target fp8jit_cli)" >&2; exit 2; }
command -v compute-sanitizer > /dev/null || { echo "memcheck.sh: compute-sanitizer not on PATH" >&2; exit 2; }
status=0
check() {  # CLI arguments
  local log rc
  log=$(compute-sanitizer --tool memcheck --print-limit 3 --error-exitcode 99 "./$B/fp8jit" "$@" --iters 1 2>&1)
  rc=$?
  echo "fp8jit $*: $(grep -m1 'ERROR SUMMARY' <<< "$log" || echo 'no summary') (exit $rc)"
  if [ "$rc" != 0 ]; then
    status=1
    grep -E '^=========' <<< "$log" | head -12
  fi
}
check quantize --m 300 --k 1000
check quantize --m 300 --k 1000 --granularity 128x128 --transpose
for scale in block tensor rowwise group; do
  check gemm --m 65 --n 24 --k 144 --scale "$scale"
done
check gemm --m 130 --n 200 --k 272 --out fp32
check gemm --m 64 --n 2112 --k 7168 --scale block
check gemm --m 700 --n 2048 --k 768 --scale block
check gemm --m 37 --n 3072 --k 4096 --scale tensor
exit $status
