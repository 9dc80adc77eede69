#!/usr/bin/env bash
# Serving checks on a lent Hopper machine (issue "serving-ready"): the warm-up of a model's kernels
# from its config (time, kernel count), then 8 processes that miss the same kernel in one empty
# cache (compiles counted from their info logs; each checks its GEMM against the float64
# reference), then FP8JIT_JIT=off after the warm-up (no compile, the launch works).
# Usage (repo root): bash tests/gpu/serving-on-gpu.sh        Logs under $OUT. Two or more GPUs:
# also `fp8jit tune --all-gpus` on a few shapes.
set -uo pipefail
OUT=${OUT:-/tmp/fp8jit-serving-out}
mkdir -p "$OUT"
source tests/gpu/build-cli.sh serving
status=0
work=$(mktemp -d /tmp/fp8jit-serving-XXXXXX)
echo "=== warm-up: DeepSeek-V3, tp=8, M=1..4096, cold cache"
FP8JIT_CACHE_DIR=$work/cache FP8JIT_DB=$work/db.sqlite ./$B/fp8jit precompile --model bench/models/deepseek-v3.json \
  --m 1-4096 --tp 8 > "$OUT/warmup.txt" 2>&1 || status=1
tail -1 "$OUT/warmup.txt"
echo "=== the same, warm cache"
FP8JIT_CACHE_DIR=$work/cache FP8JIT_DB=$work/db.sqlite ./$B/fp8jit precompile --model bench/models/deepseek-v3.json \
  --m 1-4096 --tp 8 2>&1 | tail -1
echo "=== 8 processes, one empty cache, the same GEMM"
mkdir -p "$work/shared"
for i in 0 1 2 3 4 5 6 7; do
  FP8JIT_LOG=2 FP8JIT_CACHE_DIR=$work/shared FP8JIT_DB=$work/db8.sqlite ./$B/fp8jit gemm --m 256 --n 512 --k 1024 \
    --iters 1 > "$OUT/p$i.txt" 2>&1 &
done
fails=0
for j in $(jobs -p); do wait "$j" || fails=$((fails + 1)); done
compiles=$(cat "$OUT"/p?.txt | grep -c "compiled in")
kernels=$(find "$work/shared" -name '*.cubin' | wc -l)
echo "8 processes: $fails failed, $compiles compiles in all for $kernels kernels (1 compile per kernel expected)"
[ "$fails" = 0 ] && [ "$compiles" = "$kernels" ] || status=1
# The cold launch uses per-tensor scaling: another N or K of the warmed shape may share its kernel.
echo "=== FP8JIT_JIT=off after the warm-up: a warmed shape runs, an unwarmed kernel is refused"
FP8JIT_JIT=off FP8JIT_LOG=2 FP8JIT_CACHE_DIR=$work/shared FP8JIT_DB=$work/db8.sqlite ./$B/fp8jit gemm --m 256 --n 512 \
  --k 1024 --iters 1 > "$OUT/jit-off-warm.txt" 2>&1 || status=1
grep -c "compiled in" "$OUT/jit-off-warm.txt" | sed 's/^/compiles with jit off (expect 0): /'
if FP8JIT_JIT=off FP8JIT_CACHE_DIR=$work/shared ./$B/fp8jit gemm --m 256 --n 512 --k 1024 --scale tensor --iters 1 \
  > "$OUT/jit-off-cold.txt" 2>&1; then
  echo "FAIL: an unwarmed kernel ran with FP8JIT_JIT=off"; status=1
else
  grep -o "is in neither.*" "$OUT/jit-off-cold.txt" | head -1
fi
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  echo "=== tune --all-gpus"
  printf 'm,n,k\n128,2112,7168\n256,7168,2048\n512,4096,7168\n1024,2112,7168\n' > "$work/four.csv"
  ./$B/fp8jit tune --shapes "$work/four.csv" --top-k 4 --all-gpus --db "$work/all.sqlite" > "$OUT/all-gpus.txt" 2>&1 ||
    status=1
  grep -E "^=== GPU|geometric" "$OUT/all-gpus.txt"
  echo "=== tune --all-gpus stopped by SIGTERM to the parent alone: its tuning processes stop too"
  ./$B/fp8jit tune --suite deepseek-v3 --top-k 4 --all-gpus --db "$work/term.sqlite" > "$OUT/all-gpus-term.txt" 2>&1 &
  parent=$!
  sleep 8
  kill -TERM "$parent"
  wait "$parent"
  sleep 2
  left=$(pgrep -f -- "--db $work/term.sqlite" | wc -l)
  echo "tuning processes left after the parent's SIGTERM: $left (0 expected)"
  if [ "$left" != 0 ]; then
    status=1
    pkill -f -- "--db $work/term.sqlite"
  fi
fi
rm -rf "$work"
exit "$status"
