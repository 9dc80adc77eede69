#!/usr/bin/env bash
# Cold NVRTC compile time of every default GEMM kernel of the shape lists, on this host (issue
# 18's bar: <= 0.5 s per default config on the GPU host): the heuristic's spec for each shape and
# scale mode (block, per tensor, fast accumulation; `fp8jit select-gemm`, which on a GPU machine
# reads its SM count), each distinct one compiled ROUNDS times in one process with NVRTC's own
# cache off (CUDA_CACHE_DISABLE=1), by lab/probes/nvrtc_options.py: a row per kernel and a summary.
# Usage (repo root): OUT=... bash lab/scripts/cold_compile.sh   -> $OUT/cold_compile.md
# Environment: BUILD_DIR (default build-gpu; its CLI is built if missing), LISTS (shape CSVs,
# default both lists), ROUNDS (default 1), VARIANTS ("NAME=OPT ..." entries, ';'-separated).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT=${OUT:-/tmp/fp8jit-cold-compile}
B=${BUILD_DIR:-build-gpu}
lists=${LISTS-bench/shapes/deepseek_v3.csv bench/shapes/open_models.csv}
# Bad settings stop it before anything is written or built.
[[ ${ROUNDS:-1} =~ ^[1-9][0-9]{0,2}$ ]] || { echo "cold_compile.sh: ROUNDS='${ROUNDS}': 1 to 999" >&2; exit 2; }
[ -n "${lists// /}" ] || { echo "cold_compile.sh: LISTS is empty" >&2; exit 2; }
for list in $lists; do
  [ -f "$list" ] || { echo "cold_compile.sh: LISTS: '$list': no such file" >&2; exit 2; }
done
# shellcheck disable=SC2086
grep -qE '^[0-9]+,[0-9]+,[0-9]+' $lists || { echo "cold_compile.sh: no m,n,k row in LISTS" >&2; exit 2; }
mkdir -p "$OUT"
if [ ! -x "$B/fp8jit" ]; then
  source lab/scripts/ab_common.sh  # sqlite_args
  { cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DFP8JIT_BUILD_TESTS=OFF -DFP8JIT_BUILD_BENCH=OFF \
      "${sqlite_args[@]}" && cmake --build "$B" -j"$(nproc)" --target fp8jit_cli; } > "$OUT/build.log" 2>&1 ||
    { tail -20 "$OUT/build.log"; exit 1; }
fi
specs=()
for list in $lists; do
  while IFS=, read -r m n k _; do
    case $m in '' | \#* | m) continue ;; esac
    for scale in block tensor tensor-fast; do
      args=(--m "$m" --n "$n" --k "$k" --scale "${scale%-fast}")
      [ "$scale" = tensor-fast ] && args+=(--fast-accum)
      specs+=("$("$B/fp8jit" select-gemm "${args[@]}")")
    done
  done < "$list"
done
mapfile -t distinct < <(printf '%s\n' "${specs[@]}" | sort -u)
echo "${#specs[@]} shape x scale lines, ${#distinct[@]} distinct default kernels; $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
variant_args=()
IFS=';' read -r -a vs <<< "${VARIANTS:-}"
for v in "${vs[@]}"; do [ -n "$v" ] && variant_args+=(--variant "$v"); done
CUDA_CACHE_DISABLE=1 python3 lab/probes/nvrtc_options.py --fp8jit "$B/fp8jit" --rounds "${ROUNDS:-1}" \
  "${variant_args[@]}" "${distinct[@]}" | tee "$OUT/cold_compile.md"
