// The quantize family: high-precision [M, K] -> FP8 codes + fp32 scales.
//
// Three strategies, chosen at generation time from the granularity and the transpose option:
//  - StreamQuantizer (tensor, 1x128): a team of 128/VEC lanes owns one 1x128 segment; UNROLL
//    segments per team are loaded before any is used, to keep enough bytes in flight.
//  - RowQuantizer (per row): one warp per row, an amax pass then a quantize pass (the second
//    read of the row comes from L2).
//  - TileQuantizer (128x128, and any transposed output): a CTA stages a 128x128 tile in shared
//    memory, which gives row, column and block amaxes and a conflict-free transposed write.
#pragma once

#include "fp8jit/common/reduce.cuh"
#include "fp8jit/common/scale.cuh"
#include "fp8jit/common/grid_dependency.cuh"
#include "fp8jit/quant/params.cuh"
#include "fp8jit/quant/vec_io.cuh"

namespace fp8jit {
namespace dev {

template <int VEC> FP8JIT_DEVICE float abs_max(const float (&v)[VEC], float acc) {
#pragma unroll
  for (int i = 0; i < VEC; ++i) acc = fmaxf(acc, fabsf(v[i]));  // fmaxf drops NaN
  return acc;
}

// The per-tensor scale pair of this launch: static, or from the amax pass.
template <int F> FP8JIT_DEVICE ScalePair tensor_scale(const QuantParams& p) {
  if (p.static_scale) return scale_from_static(*p.static_scale);
  return scale_from_amax(*p.tensor_amax, Fp8Max<F>::value, p.pow2 != 0);
}

// Folds a thread's amax into the optional amax output, one atomic per warp.
FP8JIT_DEVICE void publish_amax(const QuantParams& p, float amax) {
  if (!p.amax_out) return;
  amax = group_max<kWarpSize>(amax);
  if (threadIdx.x % kWarpSize == 0) atomic_max_nonneg(p.amax_out, amax);
}

// DEEPSEEK: DeepSeek-V3 act_quant's arithmetic (scale_deepseek, quantize_pack_div), 1x128 only.
template <int E, int F, int G, int VEC, int THREADS, int UNROLL, bool DEEPSEEK = false> struct StreamQuantizer {
  static_assert(G == kTensor || G == kGroup128, "StreamQuantizer serves tensor and 1x128");
  static_assert(!DEEPSEEK || (G == kGroup128 && F == kE4M3), "DeepSeek's act_quant: 1x128 groups, E4M3");
  static constexpr int kTeam = kScaleGroup / VEC;
  static_assert(kTeam >= 1 && kTeam <= kWarpSize, "StreamQuantizer: 128/VEC lanes must fit a warp");
  static constexpr int kTeams = THREADS / kTeam;
  static constexpr int kSegmentsPerCta = kTeams * UNROLL;

  // Segment j of this thread in CTA-sized chunk `chunk`: (row, first column), or row = -1 past
  // the end.
  static FP8JIT_DEVICE void locate(const QuantParams& p, u32 chunk, int j, int& row, int& col) {
    const u32 groups = (p.K + kScaleGroup - 1) / kScaleGroup;
    const u32 seg = chunk * kSegmentsPerCta + j * kTeams + threadIdx.x / kTeam;
    row = seg < static_cast<u32>(p.M) * groups ? static_cast<int>(seg / groups) : -1;
    col = static_cast<int>(seg % groups) * kScaleGroup + (threadIdx.x % kTeam) * VEC;
  }

  static FP8JIT_DEVICE void load(const QuantParams& p, u32 chunk, float (&v)[UNROLL][VEC], int (&row)[UNROLL],
                                 int (&col)[UNROLL]) {
#pragma unroll
    for (int j = 0; j < UNROLL; ++j) {
      locate(p, chunk, j, row[j], col[j]);
      if (row[j] >= 0) load_elems<E, VEC>(p.x, p.ldx, row[j], col[j], p.K, p.vector_ok, v[j]);
      else
#pragma unroll
        for (int i = 0; i < VEC; ++i) v[j][i] = 0.0f;
    }
  }

  // CTA-sized chunks of the tensor (the quantize pass's grid).
  static FP8JIT_DEVICE u32 chunk_count(const QuantParams& p) {
    const u32 groups = (p.K + kScaleGroup - 1) / kScaleGroup;
    return (static_cast<u32>(p.M) * groups + kSegmentsPerCta - 1) / kSegmentsPerCta;
  }

  // Dynamic per-tensor scaling, pass 1: amax of everything. The host launches at most as many
  // CTAs as fit on the GPU at once, each walking chunks with a stride of the grid and reducing
  // through shared memory to one atomic: with a CTA per chunk and an atomic per warp, a 67M-element
  // tensor made 262k atomics on one address and the pass ran at a third of the copy bandwidth.
  static FP8JIT_DEVICE void amax_pass(const QuantParams& p) {
    float amax = 0.0f;
    // Unrolled so that several chunks' loads are in flight per thread (a chunk may be as little
    // as 4 elements a thread).
#pragma unroll 4
    for (u32 chunk = blockIdx.x, n = chunk_count(p); chunk < n; chunk += gridDim.x) {
      float v[UNROLL][VEC];
      int row[UNROLL], col[UNROLL];
      load(p, chunk, v, row, col);
#pragma unroll
      for (int j = 0; j < UNROLL; ++j) amax = abs_max(v[j], amax);
    }
    amax = group_max<kWarpSize>(amax);
    __shared__ float warp_amax[THREADS / kWarpSize];
    if (threadIdx.x % kWarpSize == 0) warp_amax[threadIdx.x / kWarpSize] = amax;
    __syncthreads();
    if (threadIdx.x == 0) {
#pragma unroll
      for (int w = 1; w < THREADS / kWarpSize; ++w) amax = fmaxf(amax, warp_amax[w]);
      atomic_max_nonneg(p.tensor_amax, amax);
    }
  }

  static FP8JIT_DEVICE void run(const QuantParams& p) {
    float v[UNROLL][VEC];
    int row[UNROLL], col[UNROLL];
    load(p, blockIdx.x, v, row, col);
    ScalePair sp;
    if constexpr (G == kTensor) sp = tensor_scale<F>(p);
    float thread_amax = 0.0f;
#pragma unroll
    for (int j = 0; j < UNROLL; ++j) {
      const float amax = group_max<kTeam>(abs_max(v[j], 0.0f));
      thread_amax = fmaxf(thread_amax, amax);
      if constexpr (DEEPSEEK) sp.scale = scale_deepseek(amax, p.pow2 != 0);
      else if constexpr (G == kGroup128) sp = scale_from_amax(amax, Fp8Max<F>::value, p.pow2 != 0);
      if (row[j] < 0) continue;
      u32 w[VEC / 4];
      quantize_pack<F, VEC, DEEPSEEK>(v[j], DEEPSEEK ? sp.scale : sp.inv, w);
      store_fp8<VEC>(p.q, p.ldq, row[j], col[j], p.K, p.vector_ok, w);
      if (G == kGroup128 && threadIdx.x % kTeam == 0)
        p.scales[row[j] * p.scale_rs + (col[j] / kScaleGroup) * p.scale_cs] = sp.scale;
    }
    publish_amax(p, thread_amax);
  }
};

template <int E, int F, int VEC, int THREADS, int UNROLL> struct RowQuantizer {
  static constexpr int kWarps = THREADS / kWarpSize;
  static constexpr int kStep = kWarpSize * VEC;

  static FP8JIT_DEVICE void run(const QuantParams& p) {
    const int row = blockIdx.x * kWarps + threadIdx.x / kWarpSize;
    const int lane = threadIdx.x % kWarpSize;
    float amax = 0.0f;
    if (row < p.M) {
      for (int c = lane * VEC; c < p.K; c += kStep * UNROLL) {
        float v[UNROLL][VEC];
#pragma unroll
        for (int j = 0; j < UNROLL; ++j) load_elems<E, VEC>(p.x, p.ldx, row, c + j * kStep, p.K, p.vector_ok, v[j]);
#pragma unroll
        for (int j = 0; j < UNROLL; ++j) amax = abs_max(v[j], amax);
      }
    }
    amax = group_max<kWarpSize>(amax);  // whole warp: every lane shares the row
    const ScalePair sp = scale_from_amax(amax, Fp8Max<F>::value, p.pow2 != 0);
    if (row < p.M) {
      if (lane == 0) p.scales[row * p.scale_rs] = sp.scale;
      for (int c = lane * VEC; c < p.K; c += kStep * UNROLL) {
        float v[UNROLL][VEC];
#pragma unroll
        for (int j = 0; j < UNROLL; ++j) load_elems<E, VEC>(p.x, p.ldx, row, c + j * kStep, p.K, p.vector_ok, v[j]);
#pragma unroll
        for (int j = 0; j < UNROLL; ++j) {
          u32 w[VEC / 4];
          quantize_pack<F, VEC>(v[j], sp.inv, w);
          store_fp8<VEC>(p.q, p.ldq, row, c + j * kStep, p.K, p.vector_ok, w);
        }
      }
    }
    publish_amax(p, amax);
  }
};

}  // namespace dev
}  // namespace fp8jit

#include "fp8jit/quant/quantize_tile.cuh"

namespace fp8jit {
namespace dev {

// Per-tensor scaling, last step (one thread): the scale slot held the amax accumulated by the
// amax pass (dynamic) or must receive the given scale (static).
template <int F> FP8JIT_DEVICE void finalize_tensor_scale(const QuantParams& p) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  if (p.static_scale) {
    p.scales[0] = *p.static_scale;
    return;
  }
  const float amax = *p.tensor_amax;
  if (p.amax_out) *p.amax_out = amax;
  p.scales[0] = scale_from_amax(amax, Fp8Max<F>::value, p.pow2 != 0).scale;
}

// Per-row scaling with a transposed output, last step: `scales` (M rows) and `scales_t` (K
// columns) held the amaxes of pass 1, read by the quantize pass; they become the scales.
template <int F> FP8JIT_DEVICE void finalize_row_col_scales(const QuantParams& p) {
  const bool pow2 = p.pow2 != 0;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < static_cast<i64>(p.M) + p.K;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    float* slot = i < p.M ? p.scales + i * p.scale_rs : p.scales_t + (i - p.M) * p.scale_t_rs;
    *slot = scale_from_amax(*slot, Fp8Max<F>::value, pow2).scale;
  }
}

}  // namespace dev
}  // namespace fp8jit
