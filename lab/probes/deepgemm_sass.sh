#!/usr/bin/env bash
# DeepGEMM 2.6.1's SM90 block-scaled kernel (sm90_fp8_gemm_1d2d_impl) for one tile, compiled here
# with nvcc as its JIT compiles it (its flags, --register-usage-level=10 included), no GPU needed,
# then its K loops read by lab/probes/k_loop_sass.py beside fp8jit's kernel of the same tile: the
# side by side of issue 18 in SASS. The tile is DeepGEMM's own choice at a shape (the peers
# report's "DeepGEMM 2.6.1 says: ... GemmConfig(...)" line gives block_m/n, stages and cluster).
# Usage (repo root, .carry/deepgemm2 laid out by bench/peers/setup_deepgemm2.py, cuobjdump on PATH):
#   N=2112 K=7168 BLOCK_M=128 BLOCK_N=192 STAGES=4 MULTICAST=2 ON_A=false \
#     FP8JIT_SPEC='{"config":{...},"family":"gemm","problem":{...}}' bash lab/probes/deepgemm_sass.sh
# Environment: N, K (DeepGEMM compiles them in; M stays 0, a run-time value), BLOCK_M, BLOCK_N,
# STAGES, MULTICAST (1 or 2: its CTA pair), ON_A (true: the pair shares A, cluster along N),
# MATH_THREADS (default 256), FP8JIT_SPEC (optional: fp8jit's spec, compiled by FP8JIT, default
# build/fp8jit), OUT (default /tmp/deepgemm-sass). Writes $OUT/deepgemm.cubin, $OUT/fp8jit.cubin.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT=${OUT:-/tmp/deepgemm-sass}
DG=.carry/deepgemm2/deep_gemm/include
MATH_THREADS=${MATH_THREADS:-256}
for v in N K BLOCK_M BLOCK_N STAGES MULTICAST MATH_THREADS; do
  [[ ${!v:-} =~ ^[1-9][0-9]{0,5}$ ]] || { echo "deepgemm_sass.sh: $v='${!v:-}': a positive integer" >&2; exit 2; }
done
[[ ${ON_A:-false} =~ ^(true|false)$ ]] || { echo "deepgemm_sass.sh: ON_A='$ON_A': true or false" >&2; exit 2; }
[ -f "$DG/deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh" ] ||
  { echo "deepgemm_sass.sh: $DG has no DeepGEMM 2.6.1 (python3 bench/peers/setup_deepgemm2.py)" >&2; exit 2; }
command -v cuobjdump > /dev/null || { echo "deepgemm_sass.sh: no cuobjdump on PATH (lab/README.md)" >&2; exit 2; }
mkdir -p "$OUT"
# The instantiation DeepGEMM's JIT writes (csrc/jit_kernels/impls/sm90_fp8_gemm_1d2d.hpp).
cat > "$OUT/kernel.cu" << EOF
#include <deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh>
using namespace deep_gemm;
static void __instantiate_kernel() {
    auto ptr = reinterpret_cast<void*>(&sm90_fp8_gemm_1d2d_impl<
        cute::UMMA::Major::K, 0, $N, $K, 1, $BLOCK_M, $BLOCK_N, 128, 128, 128, 128, $STAGES,
        128, $MATH_THREADS, $MULTICAST, ${ON_A:-false}, 132, GemmType::Normal,
        cutlass::bfloat16_t, epilogue::transform::EpilogueIdentity>);
}
EOF
nvcc -std=c++20 --diag-suppress=39,161,174,177,186,940 --ptxas-options=--register-usage-level=10 \
  -I"$DG" --gpu-architecture=sm_90a --compiler-options=-fPIC,-O3,-fconcepts,-Wno-deprecated-declarations,-Wno-abi \
  -O3 --expt-relaxed-constexpr --expt-extended-lambda -cubin -o "$OUT/deepgemm.cubin" "$OUT/kernel.cu" ||
  { echo "deepgemm_sass.sh: nvcc failed"; exit 1; }
cubins=("$OUT/deepgemm.cubin")
if [ -n "${FP8JIT_SPEC:-}" ]; then
  "${FP8JIT:-build/fp8jit}" compile --spec "$FP8JIT_SPEC" --cubin "$OUT/fp8jit.cubin" > /dev/null ||
    { echo "deepgemm_sass.sh: fp8jit compile failed"; exit 1; }
  cubins+=("$OUT/fp8jit.cubin")
fi
python3 lab/probes/k_loop_sass.py "${cubins[@]}"
