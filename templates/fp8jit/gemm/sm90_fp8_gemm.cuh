// Scaled FP8 GEMM for Hopper: D[M, N] = (A[M, K] * sA) . (B[N, K] * sB)^T (+ bias[N]).
//
// Warp-specialised and persistent: one producer warp issues TMA loads of A and B tiles into a
// ring of kStages shared-memory stages guarded by mbarriers; one or two consumer warpgroups issue
// FP8 wgmma.mma_async on them. Each CTA walks output tiles in grouped (L2-friendly) order.
// Block scaling promotes: every 128 of K, the wgmma accumulators are scaled and added into FP32
// registers, which applies the per-block scales and sidesteps the tensor cores' limited FP8
// accumulation precision.
#pragma once

#include "fp8jit/common/barrier.cuh"
#include "fp8jit/common/convert.cuh"
#include "fp8jit/common/memory.cuh"
#include "fp8jit/common/tma.cuh"
#include "fp8jit/common/warpgroup.cuh"
#include "fp8jit/gemm/params.cuh"

namespace fp8jit {
namespace dev {

// The FP8 wgmma of shape m64nNk32: specialised in the generated source for the variant's N and
// formats (the instruction spells out N/2 accumulator registers).
template <int N, int FA, int FB> struct Wgmma;

// Grouped raster: GROUP_M tile-rows are walked column by column, so concurrently running CTAs
// share A rows and B columns in L2.
template <int GROUP_M> FP8JIT_DEVICE void tile_coords(const GemmParams& p, int t, int& tm, int& tn) {
  const int per_group = GROUP_M * p.tiles_n;
  const int group = t / per_group;
  const int first_m = group * GROUP_M;
  const int rows = min(p.tiles_m - first_m, GROUP_M);
  const int in_group = t - group * per_group;
  tm = first_m + in_group % rows;
  tn = in_group / rows;
}

template <int BLOCK_M, int BLOCK_N, int kStages, int SCALE, int OUT, int FA, int FB, bool kBias, int GROUP_M,
          bool kFastAccum>
struct Sm90Fp8Gemm {
  static constexpr int BLOCK_K = 128;  // bytes of K per stage: one 128-byte swizzle atom
  static constexpr int kMathWGs = BLOCK_M >= 128 ? 2 : 1;
  static constexpr int kRowsPerWG = BLOCK_M / kMathWGs;
  static constexpr int kMmaM = kRowsPerWG / 64;  // m64 wgmmas per warpgroup and k-step
  static constexpr int kThreads = warpgroup::kThreads * (kMathWGs + 1);
  static constexpr int kAccum = BLOCK_N / 2;     // fp32 accumulators per thread per m64
  // Fast accumulation (tensor and rowwise scaling only) keeps the whole K sum in the tensor
  // cores' accumulators, as cuBLASLt's FAST_ACCUM does: fewer registers, larger tiles, ~2e-3
  // relative error at K = 7168. Otherwise every 128 of K is promoted into FP32 registers.
  static constexpr bool kPromote = !kFastAccum;
  static_assert(!kFastAccum || SCALE == kPerTensor || SCALE == kPerRow,
                "block and group scaling apply their scales when promoting: no fast accumulation");
  static constexpr int kStageA = BLOCK_M * BLOCK_K, kStageB = BLOCK_N * BLOCK_K;
  // NOTE: producer 40 / consumers 232 registers fills the 64K register file at 384 threads.
  static constexpr int kProducerRegs = 40;
  static constexpr int kConsumerRegs = kMathWGs == 2 ? 232 : 240;
  static_assert(BLOCK_M == 64 || BLOCK_M == 128 || BLOCK_M == 256, "BLOCK_M must be 64, 128 or 256");
  static_assert(BLOCK_N % 8 == 0 && BLOCK_N >= 8 && BLOCK_N <= 256, "BLOCK_N: a multiple of 8 in [8, 256]");
  static_assert(kStageB % 1024 == 0, "stages must stay 1024-byte aligned for the 128-byte swizzle");

  static constexpr int smem_bytes() { return kStages * (kStageA + kStageB) + 2 * kStages * 8 + 1024; }

  struct Smem {
    u8* a;
    u8* b;
    u64* full;
    u64* empty;
  };

  static FP8JIT_DEVICE Smem carve(u8* raw) {
    Smem s;
    u8* base = reinterpret_cast<u8*>((reinterpret_cast<u64>(raw) + 1023) & ~u64(1023));
    s.a = base;
    s.b = base + kStages * kStageA;
    s.full = reinterpret_cast<u64*>(s.b + kStages * kStageB);
    s.empty = s.full + kStages;
    return s;
  }

  static FP8JIT_DEVICE void producer(const GemmParams& p, const Smem& s) {
    int stage = 0;
    u32 phase = 0;
    const int tiles = p.tiles_m * p.tiles_n;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      int tm, tn;
      tile_coords<GROUP_M>(p, t, tm, tn);
      for (int kb = 0; kb < p.k_blocks; ++kb) {
        barrier::wait(&s.empty[stage], phase ^ 1);
        barrier::arrive_expect_tx(&s.full[stage], kStageA + kStageB);
        tma::load_2d(s.a + stage * kStageA, &p.tma_a, &s.full[stage], kb * BLOCK_K, tm * BLOCK_M);
        tma::load_2d(s.b + stage * kStageB, &p.tma_b, &s.full[stage], kb * BLOCK_K, tn * BLOCK_N);
        if (++stage == kStages) {
          stage = 0;
          phase ^= 1;
        }
      }
    }
  }

  // Scale of A for this thread's row r of the tile (block and group modes), K block kb.
  static FP8JIT_DEVICE float scale_a_at(const GemmParams& p, int row, int kb) {
    return row < p.M ? __ldg(p.scale_a + row * p.sa_rs + kb * p.sa_cs) : 0.0f;
  }

  static FP8JIT_DEVICE void consumer(const GemmParams& p, const Smem& s, int wg) {
    const int t_in_wg = threadIdx.x % warpgroup::kThreads;
    const int warp = t_in_wg / 32, lane = t_in_wg % 32;
    float acc[kMmaM][kAccum];
    float out[kMmaM][kPromote ? kAccum : 1];
    int stage = 0;
    u32 phase = 0;
    const int tiles = p.tiles_m * p.tiles_n;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      int tm, tn;
      tile_coords<GROUP_M>(p, t, tm, tn);
      const int row0 = tm * BLOCK_M + wg * kRowsPerWG + warp * 16 + lane / 4;  // + mm*64, + 8
      const int col0 = tn * BLOCK_N + 2 * (lane % 4);                          // + 8*j, + 1
      if constexpr (kPromote) {
#pragma unroll
        for (int mm = 0; mm < kMmaM; ++mm)
#pragma unroll
          for (int i = 0; i < kAccum; ++i) out[mm][i] = 0.0f;
      }
      for (int kb = 0; kb < p.k_blocks; ++kb) {
        // Scales for this K block, loaded while the tensor cores work.
        float sa[kMmaM][2];
        float sb_lo = 0.0f, sb_hi = 0.0f;
        if constexpr (SCALE == kBlockScale) {
#pragma unroll
          for (int mm = 0; mm < kMmaM; ++mm) {
            sa[mm][0] = scale_a_at(p, row0 + mm * 64, kb);
            sa[mm][1] = scale_a_at(p, row0 + mm * 64 + 8, kb);
          }
          const int nb = (tn * BLOCK_N) / 128;
          sb_lo = __ldg(p.scale_b + nb * p.sb_rs + kb * p.sb_cs);
          const int nb_hi = min((tn * BLOCK_N + BLOCK_N - 1) / 128, (p.N - 1) / 128);
          sb_hi = __ldg(p.scale_b + nb_hi * p.sb_rs + kb * p.sb_cs);
        } else if constexpr (SCALE == kGroupScale) {
#pragma unroll
          for (int mm = 0; mm < kMmaM; ++mm) {
            sa[mm][0] = scale_a_at(p, row0 + mm * 64, kb);
            sa[mm][1] = scale_a_at(p, row0 + mm * 64 + 8, kb);
          }
        }
        barrier::wait(&s.full[stage], phase);
        const u8* a_tile = s.a + stage * kStageA + wg * kRowsPerWG * BLOCK_K;
        const u8* b_tile = s.b + stage * kStageB;
        const u64 desc_b = warpgroup::smem_desc_k128_swizzle(b_tile);
        warpgroup::arrive();
#pragma unroll
        for (int k = 0; k < BLOCK_K / 32; ++k) {
#pragma unroll
          for (int mm = 0; mm < kMmaM; ++mm) {
            const u64 desc_a = warpgroup::smem_desc_k128_swizzle(a_tile + mm * 64 * BLOCK_K);
            // +2 per k-step: 32 bytes further along K, in the descriptor's 16-byte units.
            Wgmma<BLOCK_N, FA, FB>::mma(desc_a + 2 * k, desc_b + 2 * k, acc[mm],
                                        (kPromote ? k > 0 : (kb > 0 || k > 0)) ? 1 : 0);
          }
        }
        warpgroup::commit();
        warpgroup::wait<0>();
        if (lane == 0) barrier::arrive(&s.empty[stage]);  // this warp is done with the stage
        if (++stage == kStages) {
          stage = 0;
          phase ^= 1;
        }
        if constexpr (kPromote) promote(p, acc, out, sa, sb_lo, sb_hi, tn, col0, kb);
      }
      if constexpr (kPromote) epilogue(p, out, row0, col0);
      else epilogue(p, acc, row0, col0);
    }
  }

  // out += acc * scale, per element: sA(row) * sB(block or column).
  static FP8JIT_DEVICE void promote(const GemmParams& p, const float (&acc)[kMmaM][kAccum],
                                    float (&out)[kMmaM][kPromote ? kAccum : 1], const float (&sa)[kMmaM][2],
                                    float sb_lo, float sb_hi, int tn, int col0, int kb) {
    if constexpr (SCALE == kPerTensor || SCALE == kPerRow) {
      // Scales apply once, in the epilogue: promotion is a plain FP32 sum.
#pragma unroll
      for (int mm = 0; mm < kMmaM; ++mm)
#pragma unroll
        for (int i = 0; i < kAccum; ++i) out[mm][i] += acc[mm][i];
      return;
    }
    const int first_block = (tn * BLOCK_N) / 128;
#pragma unroll
    for (int j = 0; j < BLOCK_N / 8; ++j) {
      float sb[2];
      if constexpr (SCALE == kBlockScale) {
        sb[0] = sb[1] = ((tn * BLOCK_N + 8 * j) / 128 > first_block) ? sb_hi : sb_lo;
      } else {
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int col = col0 + 8 * j + c;
          sb[c] = col < p.N ? __ldg(p.scale_b + col * p.sb_rs + kb * p.sb_cs) : 0.0f;
        }
      }
#pragma unroll
      for (int mm = 0; mm < kMmaM; ++mm) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float s = sa[mm][i / 2] * sb[i % 2];
          out[mm][4 * j + i] = fmaf(acc[mm][4 * j + i], s, out[mm][4 * j + i]);
        }
      }
    }
  }

  template <int W>
  static FP8JIT_DEVICE void epilogue(const GemmParams& p, const float (&v)[kMmaM][W], int row0, int col0) {
    static_assert(W == kAccum, "epilogue reads the full accumulator tile");
    float s_tensor = 1.0f;
    if constexpr (SCALE == kPerTensor) s_tensor = __ldg(p.scale_a) * __ldg(p.scale_b);
#pragma unroll
    for (int mm = 0; mm < kMmaM; ++mm) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + mm * 64 + 8 * h;
        if (row >= p.M) continue;
        float s_row = s_tensor;
        if constexpr (SCALE == kPerRow) s_row = __ldg(p.scale_a + row);
#pragma unroll
        for (int j = 0; j < BLOCK_N / 8; ++j) {
          const int col = col0 + 8 * j;
          if (col >= p.N) continue;
          float x[2] = {v[mm][4 * j + 2 * h], v[mm][4 * j + 2 * h + 1]};
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            float s = s_row;
            if constexpr (SCALE == kPerRow) s *= (col + c < p.N) ? __ldg(p.scale_b + col + c) : 0.0f;
            x[c] *= s;
            if constexpr (kBias)
              if (col + c < p.N) x[c] += elem_to_f32<OUT>(load_bits<ElemSize<OUT>::value>(p.bias, col + c));
          }
          store_pair(p, row, col, x);
        }
      }
    }
  }

  static FP8JIT_DEVICE void store_pair(const GemmParams& p, int row, int col, const float (&x)[2]) {
    constexpr int S = ElemSize<OUT>::value;
    const i64 at = static_cast<i64>(row) * p.ldd + col;
    if (p.pair_stores && col + 1 < p.N) {
      if constexpr (S == 4) {
        const u32 w[2] = {__float_as_uint(x[0]), __float_as_uint(x[1])};
        store_words<2>(static_cast<float*>(p.d) + at, w);
      } else {
        const u32 w[1] = {f32_to_elem<OUT>(x[0]) | (f32_to_elem<OUT>(x[1]) << 16)};
        store_words<1>(static_cast<u16*>(p.d) + at, w);
      }
    } else {
      store_bits<S>(p.d, at, f32_to_elem<OUT>(x[0]));
      if (col + 1 < p.N) store_bits<S>(p.d, at + 1, f32_to_elem<OUT>(x[1]));
    }
  }

  static FP8JIT_DEVICE void run(const GemmParams& p, u8* raw_smem) {
    const Smem s = carve(raw_smem);
    const int wg = threadIdx.x / warpgroup::kThreads;
    if (threadIdx.x == 0) {
      tma::prefetch(&p.tma_a);
      tma::prefetch(&p.tma_b);
      for (int i = 0; i < kStages; ++i) {
        barrier::init(&s.full[i], 1);
        barrier::init(&s.empty[i], kMathWGs * 4);  // one arrival per consumer warp
      }
      barrier::fence_init();
    }
    __syncthreads();
    if (wg == kMathWGs) {  // the last warpgroup produces
      warpgroup::decrease_registers<kProducerRegs>();
      if (threadIdx.x % warpgroup::kThreads == 0) producer(p, s);
    } else {
      warpgroup::increase_registers<kConsumerRegs>();
      consumer(p, s, wg);
    }
  }
};

}  // namespace dev
}  // namespace fp8jit
