#!/usr/bin/env bash
# Times a config list (lab/scripts/configs.sh's format) on several build variants in one call,
# config by config (every variant of a line back to back, the base again last), so that clock and
# thermal drift over the call fall on all variants alike. A variant is NAME=PATCH[:VAR=VALUE,...]:
# PATCH a lab patch applied to a copy of the tree ("-": the tree as it is), then the settings
# that run it. Usage (repo root, on the device):
#   OUT=... bash lab/scripts/variants.sh LIST base=- base_noreuse=-:FP8JIT_FFMA_REUSE=0 \
#     cluster=lab/patches/exp_tall_cluster.patch
# Writes $OUT/variants.md (µs per config and variant) and the build logs. BUILD_ONLY=1 builds the
# patched trees and stops (the tree's own build-gpu left alone: another step may be building it);
# PREBUILT=1 then times them without building them again.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT=${OUT:-/tmp/fp8jit-variants}
list=${1:?usage: bash lab/scripts/variants.sh LIST NAME=PATCH[:VAR=VALUE,...]...}
# Bad arguments stop it before anything is written or built.
[ -f "$list" ] || { echo "variants.sh: LIST '${list:0:200}': no such file" >&2; exit 2; }
[[ ${LINE_TIMEOUT_S:-90} =~ ^[1-9][0-9]{0,3}$ ]] ||
  { echo "variants.sh: LINE_TIMEOUT_S='${LINE_TIMEOUT_S:0:200}': whole seconds, 1 to 9999" >&2; exit 2; }
mkdir -p "$OUT"
shift
source lab/scripts/ab_common.sh  # sqlite_args, ab_patch_tree
rm -rf /tmp/fp8jit-variants-cache
# Every variant sees the same shipped tuning rows: a patched copy's binary would not find the tree's
# share/fp8jit/tuning next to it and would run the heuristic where the tree's binary ran a tuned
# row (G66: on the H200, "default" lines compared a tuned tile with a heuristic one).
export FP8JIT_SHIPPED_TUNING=${FP8JIT_SHIPPED_TUNING:-$PWD/share/fp8jit/tuning}
declare -A build envs
pids=()
for v in "$@"; do
  name=${v%%=*}
  rest=${v#*=}
  patch=${rest%%:*}
  envs[$name]=$([[ "$rest" == *:* ]] && echo "${rest#*:}" | tr ',' ' ')
  if [ "$patch" = - ]; then
    build[$name]=build-gpu
    continue
  fi
  pname=$(basename "$patch" .patch)
  build[$name]=/tmp/fp8jit-ab-build/$pname
  [[ " ${pids_names:-} " == *" $pname "* ]] && continue  # a patch shared by two variants builds once
  pids_names="${pids_names:-} $pname"
  [ "${PREBUILT:-0}" = 1 ] && continue
  ab_patch_tree "$patch" || { echo "$pname: patch does not apply"; exit 1; }
  rm -rf "/tmp/fp8jit-ab-build/$pname"  # a warm machine's build of an older patch of that name
  (nice -n 5 cmake -S "/tmp/fp8jit-ab-src/$pname" -B "/tmp/fp8jit-ab-build/$pname" -DCMAKE_BUILD_TYPE=Release \
    "${sqlite_args[@]}" && nice -n 5 cmake --build "/tmp/fp8jit-ab-build/$pname" -j8 --target fp8jit_cli) \
    > "$OUT/$pname.build.log" 2>&1 &
  pids+=($!)
done
if [ "${BUILD_ONLY:-0}" = 1 ]; then
  [ ${#pids[@]} -gt 0 ] && wait "${pids[@]}"
  exit 0
fi
{ cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release "${sqlite_args[@]}" &&
  cmake --build build-gpu -j"$(nproc)" --target fp8jit_cli; } > "$OUT/base.build.log" 2>&1 ||
  { echo "base build failed"; tail -30 "$OUT/base.build.log"; exit 1; }
[ ${#pids[@]} -gt 0 ] && wait "${pids[@]}"
names=()
for v in "$@"; do names+=("${v%%=*}"); done
names+=("${names[0]}")  # the first variant again, last: the line's drift
header="| M | N | K | scale | config |"
for n in "${names[@]}"; do header+=" $n |"; done
echo "$header" | tee "$OUT/variants.md"
echo "|$(printf ' --- |%.0s' $(seq 1 $((5 + ${#names[@]}))))" | tee -a "$OUT/variants.md"
while read -r m n k scale config; do
  [ -z "$m" ] || [ "${m:0:1}" = "#" ] && continue
  gemm_args "$m" "$n" "$k" "$scale"
  [ -n "$config" ] && args+=(--config "$config")
  row="| $m | $n | $k | $scale | ${config:-default} |"
  for name in "${names[@]}"; do
    # A hung kernel (a bad variant) costs a minute, not the call.
    line=$(timeout "${LINE_TIMEOUT_S:-90}" env FP8JIT_CACHE_DIR="/tmp/fp8jit-variants-cache/$name" ${envs[$name]} "${build[$name]}/fp8jit" "${args[@]}" 2>&1 | tail -1)
    echo "$name $m $n $k $scale ${config:-default}: $line" >> "$OUT/variants.log"
    ms=$(sed -n 's/.*: \([0-9.]*\) ms,.*/\1/p' <<< "$line")
    check=$(sed -n 's/.*(\(within\|ABOVE\) .*/\1/p' <<< "$line")
    if [ -n "$ms" ]; then
      row+=" $(awk -v ms="$ms" 'BEGIN { printf "%.1f", ms * 1000 }')$([ "$check" = within ] || echo " ($check)") |"
    else
      row+=" error |"
    fi
  done
  echo "$row" | tee -a "$OUT/variants.md"
done < "$list"
