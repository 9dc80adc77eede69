// Max-reductions across lanes, warps and blocks.
#pragma once

#include "fp8jit/common/defs.cuh"

namespace fp8jit {
namespace dev {

// Max over aligned groups of WIDTH lanes (WIDTH a power of two <= 32). Every lane of the warp
// must call it (full shuffle mask).
template <int WIDTH> FP8JIT_DEVICE float group_max(float v) {
#pragma unroll
  for (int off = WIDTH / 2; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Max over the block; `scratch` holds one float per warp. Every thread gets the result.
template <int THREADS> FP8JIT_DEVICE float block_max(float v, float* scratch) {
  constexpr int kWarps = THREADS / kWarpSize;
  v = group_max<kWarpSize>(v);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < kWarps ? scratch[lane] : 0.0f;
  v = group_max<kWarpSize>(v);
  __syncthreads();  // scratch may be reused right after
  return v;
}

// Non-negative floats order like their bit patterns, so an integer atomicMax is a float max.
FP8JIT_DEVICE void atomic_max_nonneg(float* dst, float v) {
  atomicMax(reinterpret_cast<u32*>(dst), __float_as_uint(v));
}

}  // namespace dev
}  // namespace fp8jit
