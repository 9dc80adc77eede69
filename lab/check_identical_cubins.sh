#!/usr/bin/env bash
# Checks that two builds of the CLI generate the same gemm kernels: the heuristic's default specs
# for the DeepSeek-V3 shapes (block and per-tensor scaling), ~40 specs spread over the gemm
# family's space and a few chosen corners (column halves, 256-row tiles, clusters, fp32 out) are
# NVRTC-compiled by both (`fp8jit compile --spec S --cubin X`, no GPU needed) and their cubins
# compared byte for byte; where the bytes differ, the `cuobjdump -sass` text is compared instead
# (without cuobjdump, the cubins' .text sections: lab/cubin_text.py).
#
#   lab/check_identical_cubins.sh OLD_FP8JIT NEW_FP8JIT [WORKDIR]
#
# The specs come from OLD_FP8JIT (its select-gemm and list); WORKDIR (default
# /tmp/fp8jit-cubin-check) keeps the cubins, and cubins already there are reused, so the old
# build's compile runs once (OLD_ONLY=1: compile only the old build's, e.g. before the change is
# built). Exit status 0: every kernel identical (bytes or SASS); 1 otherwise.
set -euo pipefail

old=${1:?usage: $0 OLD_FP8JIT NEW_FP8JIT [WORKDIR]}
new=${2:?usage: $0 OLD_FP8JIT NEW_FP8JIT [WORKDIR]}
work=${3:-/tmp/fp8jit-cubin-check}
here=$(cd "$(dirname "$0")/.." && pwd)
cuobjdump=${CUOBJDUMP:-/usr/local/cuda/bin/cuobjdump}
[[ -x $cuobjdump ]] || cuobjdump=$(command -v cuobjdump || true)
samples=${SAMPLES:-40}
mkdir -p "$work/old" "$work/new"

specs="$work/specs.txt"
if [[ ! -s $specs ]]; then
  {
    grep "^[0-9]" "$here/bench/shapes/deepseek_v3.csv" | while IFS=, read -r m n k; do
      for scale in block tensor; do
        "$old" select-gemm --m "$m" --n "$n" --k "$k" --scale "$scale"
      done
    done
    # --specs since 2026-11-29; older binaries printed the specs under --json.
    "$old" list --specs --family gemm >"$work/all.txt" 2>/dev/null ||
      "$old" list --json --family gemm >"$work/all.txt"
    total=$(wc -l <"$work/all.txt")
    # Evenly spaced, the offset moving through the config space as well as the problems.
    for ((i = 0; i < samples; i++)); do
      sed -n "$((i * total / samples + (i * 7919) % 997 + 1))p" "$work/all.txt"
    done
    corner() { # scale accum bias out block_m block_n stages cluster_m cluster_n
      printf '{"family":"gemm","problem":{"a_format":"e4m3","b_format":"e4m3","scale":"%s","accum":"%s","bias":%s,"out":"%s"},' "$1" "$2" "$3" "$4"
      printf '"config":{"block_m":%s,"block_n":%s,"stages":%s,"group_m":8,"cluster_m":%s,"cluster_n":%s}}\n' "$5" "$6" "$7" "$8" "$9"
    }
    corner block precise 0 bf16 128 256 3 1 1      # column halves, overlapped
    corner tensor precise 1 bf16 128 224 3 1 1     # column halves with bias
    corner rowwise precise 0 fp32 128 240 2 1 1    # column halves, rowwise (not overlapped)
    corner group precise 1 fp16 256 64 3 1 1       # two m64 slabs per warpgroup
    corner tensor fast 0 bf16 256 144 3 1 1        # fast accumulation, 256 rows
    corner block precise 0 bf16 128 128 5 2 1      # CTA pair along M
    corner tensor precise 0 fp32 64 40 8 1 2       # CTA pair along N
  } | sort -u >"$specs"
fi

compile() { # binary dir index spec
  local out="$2/$3.cubin"
  [[ -s $out ]] || "$1" compile --spec "$4" --cubin "$out" >/dev/null
}
export -f compile

# Every compile first, JOBS at a time (default: one per core); then the comparisons.
builds=("$old")
[[ ${OLD_ONLY:-0} == 1 ]] || builds+=("$new")
i=0
while IFS= read -r spec; do
  i=$((i + 1))
  for b in "${builds[@]}"; do
    dir=$work/new
    [[ $b == "$old" ]] && dir=$work/old
    printf '%s\0%s\0%s\0%s\0' "$b" "$dir" "$i" "$spec"
  done
done <"$specs" | xargs -0 -n 4 -P "${JOBS:-$(nproc)}" bash -c 'compile "$@"' _ || { echo "a compile failed"; exit 1; }
[[ ${OLD_ONLY:-0} == 1 ]] && exit 0

same=0 sass_same=0 differ=0 i=0
while IFS= read -r spec; do
  i=$((i + 1))
  if cmp -s "$work/old/$i.cubin" "$work/new/$i.cubin"; then
    same=$((same + 1))
  elif [[ -n $cuobjdump ]] && "$cuobjdump" -sass "$work/old/$i.cubin" >"$work/old/$i.sass" &&
    "$cuobjdump" -sass "$work/new/$i.cubin" >"$work/new/$i.sass" && cmp -s "$work/old/$i.sass" "$work/new/$i.sass"; then
    sass_same=$((sass_same + 1))
    echo "same SASS, different bytes: $spec"
  elif [[ -z $cuobjdump ]] && python3 "$here/lab/cubin_text.py" "$work/old/$i.cubin" "$work/new/$i.cubin"; then
    # No cuobjdump here: the kernels' .text sections (their machine code) compared instead.
    sass_same=$((sass_same + 1))
    echo "same .text sections, different bytes: $spec"
  else
    differ=$((differ + 1))
    echo "DIFFERENT${cuobjdump:+ SASS}${cuobjdump:- (no cuobjdump: set CUOBJDUMP)}: $spec"
  fi
done <"$specs"
echo "$i kernels: $same byte-identical cubins, $sass_same identical SASS only, $differ different"
[[ $differ -eq 0 ]]
