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
# Logs, tables (*.txt) and the sweeps' exports (*.json) go into $OUT/multi-gpu.tar.gz: the device
# tool hands back a few files only.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
RESULTS=${OUT:-/tmp/fp8jit-multi-gpu}
OUT=/tmp/fp8jit-multi-logs
STEPS=${1:-build gtests tune overlap}
mkdir -p "$OUT" "$RESULTS"
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

# Runs a command under bash's `time`: "real user sys" seconds (children included) into $1.
timed() {
  local f=$1 TIMEFORMAT='%R %U %S'
  shift
  { time "$@"; } 2> "$f"
}
one_gpu() {
  CUDA_VISIBLE_DEVICES=0 FP8JIT_CACHE_DIR=$work/tune/cache-one ./$B/fp8jit tune --shapes "$suite" \
    --db "$work/tune/one.sqlite" > "$OUT/tune_one.txt" 2>&1
}
all_gpus() {
  FP8JIT_CACHE_DIR=$work/tune/cache-all ./$B/fp8jit tune --shapes "$suite" --all-gpus \
    --db "$work/tune/all.sqlite" > "$OUT/tune_all.txt" 2>&1
}
simulated_hosts() {
  local d pids=() rc=0
  for ((d = 0; d < gpus; ++d)); do
    SLURM_PROCID=$d SLURM_NTASKS=$gpus CUDA_VISIBLE_DEVICES=$d FP8JIT_CACHE_DIR=$work/tune/cache-host$d \
      ./$B/fp8jit tune --shapes "$suite" --db "$work/tune/host$d.sqlite" > "$OUT/tune_host$d.txt" 2>&1 &
    pids+=($!)
  done
  for ((d = 0; d < gpus; ++d)); do wait "${pids[$d]}" || rc=1; done
  return $rc
}

tune_sweeps() {
  local d
  rm -rf "$work/tune" && mkdir -p "$work/tune"
  echo "--- one GPU (device 0)"
  timed "$OUT/time_one.txt" one_gpu || fail "tune on one GPU"
  echo "--- --all-gpus ($gpus GPUs)"
  timed "$OUT/time_all.txt" all_gpus || fail "tune --all-gpus"
  echo "--- $gpus simulated hosts (SLURM_PROCID/SLURM_NTASKS), a database each, merged"
  timed "$OUT/time_hosts.txt" simulated_hosts || fail "tune on the simulated hosts"
  for ((d = 0; d < gpus; ++d)); do
    ./$B/fp8jit db export --db "$work/tune/host$d.sqlite" --file "$OUT/host$d-export.json" || fail "export host $d"
    ./$B/fp8jit db import --db "$work/tune/merged.sqlite" --file "$OUT/host$d-export.json" || fail "import host $d"
  done
  for db in one all merged; do
    ./$B/fp8jit db export --db "$work/tune/$db.sqlite" --file "$OUT/$db-export.json" || fail "export $db"
    ./$B/fp8jit db list --db "$work/tune/$db.sqlite" > "$OUT/db_$db.txt"
  done
  python3 bench/multi_gpu/check_sweeps.py "$suite" "$OUT"/{one,all,merged}-export.json || fail "sweep check"
  # Busy cores: CPU seconds (every process) over wall seconds; the sweeps' serial phases leave
  # cores idle that a second process fills.
  for t in one all hosts; do
    awk -v t="$t" '{ printf "%-6s wall %6.1f s, CPU %7.1f s, %5.1f cores busy on average\n", t, $1, $2 + $3, ($2 + $3) / $1 }' \
      "$OUT/time_$t.txt"
  done | tee "$OUT/tune_wall.txt"
  grep -h "^=== GPU\|geometric" "$OUT/tune_all.txt" | head -8
}

overlap() {
  # NCCL_DEBUG=INFO: the log says how many channels (CTAs) the all-reduce runs on.
  NCCL_DEBUG=INFO PYTHONPATH=build-py/python FP8JIT_CACHE_DIR=$work/overlap-cache timeout 400 \
    python3 -m torch.distributed.run --nproc-per-node "$gpus" bench/multi_gpu/overlap.py \
    --budgets "${BUDGETS:-0,120,100}" --out "$OUT/overlap.json" > "$OUT/overlap.txt" 2>&1 || fail "overlap"
  grep -m4 -i "channels\|nchannels" "$OUT/overlap.txt"
  grep -v "NCCL INFO\|^\[W\|Warning\|warn(" "$OUT/overlap.txt" | tail -24
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
tar -czf "$RESULTS/multi-gpu.tar.gz" -C "$OUT" . && echo "logs: $RESULTS/multi-gpu.tar.gz"
exit "$status"
