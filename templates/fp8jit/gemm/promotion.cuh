// Promotion of the wgmma accumulators into the FP32 sums, every 128 of K (precise accumulation):
// the per-K-block scale factors of a consumer thread's rows, read from the stage, and the
// FFMAs that apply them (block and group scaling) or the plain sums (per tensor and rowwise,
// whose scales apply once, in the epilogue).
#pragma once

#include "fp8jit/common/memory.cuh"
#include "fp8jit/gemm/params.cuh"

namespace fp8jit {
namespace dev {

// kMmaM: m64 slabs per warpgroup; kChunks: column halves computed in turn (Sm90GemmTraits).
template <int BLOCK_M, int BLOCK_N, int kMmaM, int kChunks, int SCALE> struct Sm90GemmPromotion {
  static constexpr int kAccum = BLOCK_N / 2;  // fp32 sums per thread per m64
  static constexpr int kChunkAccum = BLOCK_N / kChunks / 2;
  static constexpr bool kStagedScales = SCALE == kBlockScale || gemm_scales_per_column(SCALE);
  // A tile of B may straddle two 128-wide scale blocks unless BLOCK_N divides 128.
  static constexpr bool kTwoBlocksOfB = (128 % BLOCK_N) != 0;

  // Per-K-block scale factors of this thread's rows: s[mm][h] for row half h, and for block
  // scaling a second set for the tile's columns in the next 128-block of B.
  struct BlockScales {
    float lo[kMmaM][2];
    float hi[kMmaM][2];
  };

  // This thread's per-row factors from a stage's staged scales (A's tile rows from st_a, B's
  // blocks from st_b); `r` is the thread's first row within the tile. Block scaling folds B's
  // scale into them.
  static FP8JIT_DEVICE void read_scales(const float* st_a, const float* st_b, int r, int sb_hi_at, BlockScales& bs) {
    if constexpr (SCALE == kSwappedBlockScale) {
      // The tile's rows lie in one 128-row block of its A (the problem's B): one factor for all.
      const float sa = load_shared_f32(st_a);
#pragma unroll
      for (int mm = 0; mm < kMmaM; ++mm)
#pragma unroll
        for (int h = 0; h < 2; ++h) bs.lo[mm][h] = bs.hi[mm][h] = sa;
    } else if constexpr (kStagedScales) {
      const float* st = st_a;
      const float sb_lo = SCALE == kBlockScale ? load_shared_f32(st_b) : 1.0f;
      const float sb_hi = SCALE == kBlockScale ? load_shared_f32(st_b + sb_hi_at) : 1.0f;
#pragma unroll
      for (int mm = 0; mm < kMmaM; ++mm)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float sa = load_shared_f32(st + r + mm * 64 + 8 * h);
          bs.lo[mm][h] = sa * sb_lo;
          bs.hi[mm][h] = sa * sb_hi;
        }
    }
  }

  // out += acc * scale: one FFMA per element with the per-row products precomputed. `sb` points
  // at the staged 1x128 scale of B for this thread's first column (group scaling); `split_j`:
  // see block_split().
  static FP8JIT_DEVICE void promote(const float (&acc)[kMmaM][kAccum], float (&out)[kMmaM][kAccum],
                                    const BlockScales& bs, const float* sb, int split_j) {
    if constexpr (SCALE == kPerTensor || SCALE == kPerRow) {
      // Scales apply once, in the epilogue: promotion is a plain FP32 sum.
#pragma unroll
      for (int mm = 0; mm < kMmaM; ++mm)
#pragma unroll
        for (int i = 0; i < kAccum; ++i) out[mm][i] += acc[mm][i];
    } else if constexpr (SCALE == kBlockScale) {
      if constexpr (kTwoBlocksOfB) promote_block(acc, out, bs, split_j);
      else promote_split<BLOCK_N / 8>(acc, out, bs);
    } else {  // 1x128 scales of B (group, swapped block): one per column, staged (0 past the edge)
#pragma unroll
      for (int j = 0; j < BLOCK_N / 8; ++j) {
        const float sb_c[2] = {load_shared_f32(sb + 8 * j), load_shared_f32(sb + 8 * j + 1)};
#pragma unroll
        for (int mm = 0; mm < kMmaM; ++mm)
#pragma unroll
          for (int i = 0; i < 4; ++i)
            out[mm][4 * j + i] = fmaf(acc[mm][4 * j + i], bs.lo[mm][i / 2] * sb_c[i % 2], out[mm][4 * j + i]);
      }
    }
  }

  // Column half c of a chunked tile (kChunks = 2): out's elements from c * kChunkAccum on. Block
  // scaling: half c is the c-th 128-block of B (bs.lo, bs.hi).
  static FP8JIT_DEVICE void promote_chunk(const float (&acc)[kMmaM][kChunkAccum], float (&out)[kMmaM][kAccum],
                                          const BlockScales& bs, int c) {
#pragma unroll
    for (int mm = 0; mm < kMmaM; ++mm)
#pragma unroll
      for (int i = 0; i < kChunkAccum; ++i) {
        float& o = out[mm][c * kChunkAccum + i];
        if constexpr (SCALE == kBlockScale) o = fmaf(acc[mm][i], c == 0 ? bs.lo[mm][(i % 4) / 2] : bs.hi[mm][(i % 4) / 2], o);
        else o += acc[mm][i];
      }
  }

  // Block scaling with a tile that straddles two 128-wide blocks of B: the columns before
  // 8 * split_j take the first block's scale, the rest the second's. The split depends on the
  // tile's column, so it is dispatched once per K block (a warp-uniform branch) to a promotion
  // with the split fixed at compile time: one FFMA per element, no select.
  static constexpr int kSplitStep = (BLOCK_N % 128 == 0 ? 128 : BLOCK_N % 64 == 0 ? 64 : BLOCK_N % 32 == 0 ? 32
                                     : BLOCK_N % 16 == 0 ? 16 : 8) / 8;  // gcd(BLOCK_N, 128) / 8
  static FP8JIT_DEVICE int block_split(int tn) {
    const int to_next = 128 - (tn * BLOCK_N) % 128;  // columns left in the first block
    return to_next >= BLOCK_N ? BLOCK_N / 8 : to_next / 8;
  }
  static FP8JIT_DEVICE void promote_block(const float (&acc)[kMmaM][kAccum], float (&out)[kMmaM][kAccum],
                                          const BlockScales& bs, int split_j) {
    dispatch_split(split_j, [&](auto split) { promote_split<decltype(split)::value>(acc, out, bs); });
  }
  // The split as a type, chosen by a warp-uniform branch: per K block by promote_block, per tile
  // by the pipelined K loop, which is instantiated once per split a tile can have so that no
  // branch sits between a wgmma wait and the promotion it covers (a run-time dispatch there made
  // ptxas inject waits, C7517).
  template <int S> struct SplitAt {
    static constexpr int value = S;
  };
  template <int S = kSplitStep, class F>
  static FP8JIT_DEVICE void dispatch_split(int split_j, F&& f) {
    if constexpr (S >= BLOCK_N / 8) {
      f(SplitAt<BLOCK_N / 8>{});
    } else {
      if (split_j == S) f(SplitAt<S>{});
      else dispatch_split<S + kSplitStep>(split_j, f);
    }
  }
  // The split as data: each column group selects its factors (an FSEL per row half, the
  // predicate uniform over the tile), so one loop serves every split. Exact: the selected
  // factor is lo or hi itself.
  static FP8JIT_DEVICE void promote_selected(const float (&acc)[kMmaM][kAccum], float (&out)[kMmaM][kAccum],
                                             const BlockScales& bs, int split_j) {
#pragma unroll
    for (int j = 0; j < BLOCK_N / 8; ++j) {
      const bool second = j >= split_j;
#pragma unroll
      for (int mm = 0; mm < kMmaM; ++mm) {
        const float f[2] = {second ? bs.hi[mm][0] : bs.lo[mm][0], second ? bs.hi[mm][1] : bs.lo[mm][1]};
#pragma unroll
        for (int i = 0; i < 4; ++i) out[mm][4 * j + i] = fmaf(acc[mm][4 * j + i], f[i / 2], out[mm][4 * j + i]);
      }
    }
  }
  template <int SPLIT>
  static FP8JIT_DEVICE void promote_split(const float (&acc)[kMmaM][kAccum], float (&out)[kMmaM][kAccum],
                                          const BlockScales& bs) {
#pragma unroll
    for (int j = 0; j < BLOCK_N / 8; ++j)
#pragma unroll
      for (int mm = 0; mm < kMmaM; ++mm)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          out[mm][4 * j + i] = fmaf(acc[mm][4 * j + i], j < SPLIT ? bs.lo[mm][i / 2] : bs.hi[mm][i / 2], out[mm][4 * j + i]);
  }
};

}  // namespace dev
}  // namespace fp8jit
