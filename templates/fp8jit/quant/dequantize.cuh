// The dequantize family: FP8 codes [M, K] and fp32 scales -> bf16, fp16 or fp32.
// Each thread converts UNROLL segments of VEC codes; all loads are issued before any store.
#pragma once

#include "fp8jit/common/grid_dependency.cuh"
#include "fp8jit/quant/params.cuh"
#include "fp8jit/quant/vec_io.cuh"

namespace fp8jit {
namespace dev {

template <int F, int E, int G, int VEC, int THREADS, int UNROLL> struct Dequantizer {
  static_assert(kScaleGroup % VEC == 0, "Dequantizer: a segment must not straddle two scales");
  static constexpr int kSegmentsPerCta = THREADS * UNROLL;

  static FP8JIT_DEVICE float scale_of(const DequantParams& p, int row, int col) {
    if constexpr (G == kTensor) return p.scales[0];
    const int i = (G == kBlock128) ? row / kScaleGroup : row;
    const int j = (G == kRow) ? 0 : col / kScaleGroup;
    return p.scales[i * p.scale_rs + j * p.scale_cs];
  }

  static FP8JIT_DEVICE void run(const DequantParams& p) {
    const u32 per_row = (p.K + VEC - 1) / VEC;
    const u32 total = static_cast<u32>(p.M) * per_row;
    float v[UNROLL][VEC];
    int row[UNROLL], col[UNROLL];
#pragma unroll
    for (int j = 0; j < UNROLL; ++j) {
      const u32 seg = blockIdx.x * kSegmentsPerCta + j * THREADS + threadIdx.x;
      row[j] = seg < total ? static_cast<int>(seg / per_row) : -1;
      col[j] = static_cast<int>(seg % per_row) * VEC;
      if (row[j] >= 0) load_fp8<F, VEC>(p.q, p.ldq, row[j], col[j], p.K, p.vector_ok, v[j]);
    }
#pragma unroll
    for (int j = 0; j < UNROLL; ++j) {
      if (row[j] < 0) continue;
      const float s = scale_of(p, row[j], col[j]);
#pragma unroll
      for (int i = 0; i < VEC; ++i) v[j][i] = mul_rn(v[j][i], s);
      store_elems<E, VEC>(p.y, p.ldy, row[j], col[j], p.K, p.vector_ok, v[j]);
    }
  }
};

}  // namespace dev
}  // namespace fp8jit
