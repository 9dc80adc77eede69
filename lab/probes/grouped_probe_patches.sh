#!/usr/bin/env bash
# lab/probes/grouped_probe.cpp against the tree and against each patch (lab/patches/*.patch), one
# after another in one process per library: which change moves the grouped kernel's time.
# PROBE_CASES as for grouped_probe.sh. Usage (repo root, device):
#   OUT=... PROBE_CASES="..." bash lab/probes/grouped_probe_patches.sh PATCH...
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT=${OUT:-/tmp/fp8jit-probe}
mkdir -p "$OUT"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
source lab/scripts/ab_common.sh  # sqlite_args
root=$PWD
pids=()
# The tree itself is built as a copy too, from scratch: a build folder kept on the device from
# an earlier call can look newer than the files the call brought, and would time an older tree.
for patch in tree "$@"; do
  name=$(basename "$patch" .patch)
  src=/tmp/fp8jit-pp/$name
  rm -rf "$src" && mkdir -p "$src" &&
    tar -C "$root" --exclude=./build-gpu --exclude=./build-peers --exclude=./.carry -cf - . | tar -x -C "$src"
  ln -s "$root/.carry" "$src/.carry"
  if [ "$patch" != tree ]; then
    (cd "$src" && patch -p1 < "$root/$patch" > /dev/null) || { echo "$name: does not apply"; continue; }
  fi
  (cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release -DFP8JIT_BUILD_TESTS=OFF "${sqlite_args[@]}" &&
    cmake --build "$src/build" -j5 --target fp8jit_shared) > "$OUT/pp_$name.build.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
spec() {
  echo "{\"family\":\"gemm\",\"config\":{$1},\"problem\":{\"a_format\":\"e4m3\",\"accum\":\"precise\",\"b_format\":\"e4m3\",\"bias\":0,\"out\":\"bf16\",\"scale\":\"block\"$2}}"
}
for lib in $(for patch in tree "$@"; do echo "/tmp/fp8jit-pp/$(basename "$patch" .patch)/build"; done); do
  [ -f "$lib/libfp8jit.so" ] || { echo "== $lib: no library"; continue; }
  g++ -std=c++20 -O2 -Iinclude -I"$lib/generated/include" -I"$CUDA_HOME/include" lab/probes/grouped_probe.cpp \
    -L"$lib" -lfp8jit -Wl,-rpath,"$lib" -L"$CUDA_HOME/lib64/stubs" -lcuda -o /tmp/grouped_probe_pp || continue
  echo "== $lib"
  while read -r g per n k cfg dcfg; do
    [ -z "$g" ] && continue
    timeout 120 /tmp/grouped_probe_pp "$g" "$per" "$n" "$k" "$(spec "$cfg" ',"layout":"contiguous"')" "$(spec "${dcfg:-$cfg}" '')" 2>&1
  done <<< "${PROBE_CASES:-}"
done
