#!/usr/bin/env bash
# One device call: fp8jit's default kernel and DeepGEMM 2.6.1's under Nsight Compute at each of
# SHAPES (lab/probes/ncu_peer_pair.sh per shape), for the side by side of two kernels of the same
# tile: speed of light, memory, warp states and per-SASS stall samples. Builds build-gpu (CLI and
# libfp8jit.so) and DeepGEMM 2.6.1's extension at once first.
# Usage (repo root, on the device): OUT=... SHAPES="4096x4096x7168:block ..." bash lab/scripts/peer_profile.sh
# Writes $OUT/check.log and $OUT/<M>x<N>x<K>_<scale>.tgz (the pair's files) per shape.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT=${OUT:?set OUT to the output folder}
source lab/scripts/ab_common.sh  # sqlite_args, call_log
call_log || exit 1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv
step "builds (build-gpu, DeepGEMM 2.6.1) on $(nproc) cores"
(cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFP8JIT_BUILD_BENCH=OFF -DFP8JIT_BUILD_TESTS=OFF \
  "${sqlite_args[@]}" && cmake --build build-gpu -j"$(nproc)" --target fp8jit_cli fp8jit_shared) \
  > /tmp/peer_profile_build.log 2>&1 &
build_pid=$!
bash bench/peers/build_deepgemm2.sh .carry/deepgemm2 > /tmp/peer_profile_dg2.log 2>&1
tail -1 /tmp/peer_profile_dg2.log
wait "$build_pid" || { step "build failed"; tail -30 /tmp/peer_profile_build.log; exit 1; }
step "builds done"
for s in ${SHAPES:?set SHAPES, e.g. 4096x4096x7168:block}; do
  IFS=x read -r m n k <<< "${s%%:*}"
  scale=${s##*:} config=
  [[ $s == *:*:* ]] && { scale=$(cut -d: -f2 <<< "$s"); config=$(cut -d: -f3- <<< "$s"); }
  [ "$(left)" -lt 100 ] && { step "no time left for $s"; break; }
  step "pair $m x $n x $k $scale ${config:-(default config)}"
  BUILD_DIR=build-gpu OUT=/tmp/pp/$s timeout "$(($(left) - 10))" bash lab/probes/ncu_peer_pair.sh "$m" "$n" "$k" "$scale" $config
  cp "/tmp/pp/$s/pair.tgz" "$OUT/${m}x${n}x${k}_$scale.tgz" 2>/dev/null || step "no pair.tgz for $s"
done
step "done"
