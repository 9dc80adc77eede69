#!/usr/bin/env bash
# Tuning over several GPUs and a GEMM beside NCCL traffic, on one machine with two or more GPUs
# (the device tool's nvidia-h200-x2 or nvidia-h100-x2). Steps, in order (any subset as $1):
#   build    build-gpu (CLI, GPU tests) and build-py (the Python module) at once
#   gtests   the GPU tests on every GPU at once (CUDA_VISIBLE_DEVICES=d each)
#   tune     the DeepSeek-V3 suite (block) on GPU 0 alone, then with `tune --all-gpus` into one
#            database, then as two simulated hosts (SLURM_PROCID/SLURM_NTASKS set by hand, one
#            process and one database per GPU) merged with `fp8jit db import`; each with an empty
#            kernel cache; checks every shape is tuned exactly once and each row names its GPU
#   overlap  bench/multi_gpu/overlap.py: block-scaled GEMMs with SM budgets beside an all-reduce
# Usage (repo root, on the device): bash bench/multi_gpu/run.sh "build gtests tune overlap"
# Logs and results under $OUT (tables in $OUT/*.txt, rows in $OUT/*.json and *.sqlite exports).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/fp8jit-multi-gpu}
STEPS=${1:-build gtests tune overlap}
mkdir -p "$OUT"
# NVLink multicast off, as the machine's notes require, also for processes started here.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gpus=$(nvidia-smi -L | wc -l)
nvidia-smi -L | tee "$OUT/gpus.txt"
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1 && head -4 "$OUT/topo.txt"
status=0
fail() { echo "FAIL: $*"; status=1; }
B=build-gpu
work=/tmp/fp8jit-multi-work
suite=bench/shapes/deepseek_v3.csv

build() {
  OUT=$OUT/build bash tests/gpu/run-on-gpu.sh build-only &
  local gpu=$!
  (OUT=$OUT/build-py PYTEST=0 bash tests/gpu/python-on-gpu.sh) &
  local py=$!
  wait $gpu || return 1
  wait $py
}

gtests() {
  local pids=() d
  for ((d = 0; d < gpus; ++d)); do
    CUDA_VISIBLE_DEVICES=$d FP8JIT_CACHE_DIR=$work/gtests-cache-$d FP8JIT_DB=$work/gtests-$d.sqlite \
      timeout 500 ./$B/tests/fp8jit_gpu_tests --gtest_brief=1 > "$OUT/gpu_tests_$d.log" 2>&1 &
    pids+=($!)
  done
  for ((d = 0; d < gpus; ++d)); do
    wait "${pids[$d]}" || fail "GPU tests on device $d"
    echo "device $d ($(sed -n "$((d + 1))p" "$OUT/gpus.txt" | cut -c1-40)): $(grep -E "tests ran|PASSED|FAILED|SKIPPED" \
      "$OUT/gpu_tests_$d.log" | tr '\n' ' ')"
  done
}

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

tune_sweeps() {
  local t0 d pids=()
  rm -rf "$work/tune" && mkdir -p "$work/tune"
  echo "--- one GPU (device 0)"
  t0=$(now)
  CUDA_VISIBLE_DEVICES=0 FP8JIT_CACHE_DIR=$work/tune/cache-one ./$B/fp8jit tune --shapes "$suite" \
    --db "$work/tune/one.sqlite" > "$OUT/tune_one.txt" 2>&1 || fail "tune on one GPU"
  local one=$(since "$t0")
  echo "--- --all-gpus ($gpus GPUs)"
  t0=$(now)
  FP8JIT_CACHE_DIR=$work/tune/cache-all ./$B/fp8jit tune --shapes "$suite" --all-gpus \
    --db "$work/tune/all.sqlite" > "$OUT/tune_all.txt" 2>&1 || fail "tune --all-gpus"
  local all=$(since "$t0")
  echo "--- $gpus simulated hosts (SLURM_PROCID/SLURM_NTASKS), a database each, merged"
  t0=$(now)
  for ((d = 0; d < gpus; ++d)); do
    SLURM_PROCID=$d SLURM_NTASKS=$gpus CUDA_VISIBLE_DEVICES=$d FP8JIT_CACHE_DIR=$work/tune/cache-host$d \
      ./$B/fp8jit tune --shapes "$suite" --db "$work/tune/host$d.sqlite" > "$OUT/tune_host$d.txt" 2>&1 &
    pids+=($!)
  done
  for ((d = 0; d < gpus; ++d)); do wait "${pids[$d]}" || fail "tune on simulated host $d"; done
  local hosts=$(since "$t0")
  for ((d = 0; d < gpus; ++d)); do
    ./$B/fp8jit db export --db "$work/tune/host$d.sqlite" --file "$OUT/host$d-export.json" || fail "export host $d"
    ./$B/fp8jit db import --db "$work/tune/merged.sqlite" --file "$OUT/host$d-export.json" || fail "import host $d"
  done
  for db in one all merged; do
    ./$B/fp8jit db export --db "$work/tune/$db.sqlite" --file "$OUT/$db-export.json" || fail "export $db"
    ./$B/fp8jit db list --db "$work/tune/$db.sqlite" > "$OUT/db_$db.txt"
  done
  python3 bench/multi_gpu/check_sweeps.py "$suite" "$OUT"/{one,all,merged}-export.json || fail "sweep check"
  awk -v o="$one" -v a="$all" -v h="$hosts" -v g="$gpus" 'BEGIN { printf "wall seconds: one GPU %.1f, --all-gpus \
%.1f (%.2fx), %d simulated hosts %.1f (%.2fx)\n", o, a, o / a, g, h, o / h }' | tee "$OUT/tune_wall.txt"
  grep -h "^=== GPU\|geometric" "$OUT/tune_all.txt" | head -8
}

overlap() {
  PYTHONPATH=build-py/python FP8JIT_CACHE_DIR=$work/overlap-cache timeout 400 \
    python3 -m torch.distributed.run --nproc-per-node "$gpus" bench/multi_gpu/overlap.py \
    --out "$OUT/overlap.json" > "$OUT/overlap.txt" 2>&1 || fail "overlap"
  grep -v "^\[W\|Warning\|warn(" "$OUT/overlap.txt" | tail -20
}

for step in $STEPS; do
  echo "=== $step ($(date +%T))"
  t0=$SECONDS
  case $step in
    build) build || fail build ;;
    gtests) gtests ;;
    tune) tune_sweeps ;;
    overlap) overlap ;;
    *) fail "unknown step '$step' (build gtests tune overlap)" ;;
  esac
  echo "=== $step: $((SECONDS - t0)) s"
done
exit "$status"
