// The producer's loads of each K block's scales into the stage (block and group scaling), by
// TMA where the scale layout allows and by cp.async otherwise, and block scaling's two scales of
// B per tile. Split from the kernel (sm90_fp8_gemm.cuh) as one concern of the producer warp.
#pragma once

#include "fp8jit/common/async_copy.cuh"
#include "fp8jit/common/memory.cuh"
#include "fp8jit/common/tma.cuh"
#include "fp8jit/gemm/params.cuh"
#include "fp8jit/gemm/scheduler.cuh"

namespace fp8jit {
namespace dev {

// kScalesB: where B's scales start among a stage's (GemmGeometry::scales_a); kAlignA: A's TMA box
// starts at the tile's first row rounded down to 4 (grouped tiles: GemmGeometry::scales_a);
// kBoxA: the rows of A's box (GemmGeometry::scale_box_a), a second box covering the rest of
// kScalesB where one cannot hold them all.
template <int BLOCK_M, int BLOCK_N, int SCALE, int kScalesB, bool kAlignA, int kBoxA>
struct Sm90GemmScaleLoads {
  static_assert(
      kBoxA == kScalesB || (2 * kBoxA >= kScalesB && (kScalesB - kBoxA) % 4 == 0),
      "A's scales in one box, or two whose second starts on 16 bytes with no rows between them");
  // K block kb's scales of unit w's tile by TMA (see GemmParams): A's, and group scaling's B;
  // past the edges TMA fills zeros.
  static FP8JIT_DEVICE void load_scales_tma(const GemmParams& p, float* dst, u64* bar, const GemmUnit& w, int kb) {
    if constexpr (SCALE != kSwappedBlockScale) {
      const int row = kAlignA ? w.row0 & ~3 : w.row0;
      tma::load_2d(dst, &p.tma_sa, bar, row, kb);
      constexpr int kSecond = kScalesB - kBoxA;  // a multiple of 4 rows: its box starts on 16 bytes
      if constexpr (kSecond > 0) tma::load_2d(dst + kSecond, &p.tma_sa, bar, row + kSecond, kb);
    }
    if constexpr (gemm_scales_per_column(SCALE))
      tma::load_2d(dst + kScalesB, &p.tma_sb, bar, w.tn * BLOCK_N, kb);
  }

  // Swapped block scaling: the one 128x128 block scale of the kernel's A (the problem's B) that
  // the tile's rows lie in (BLOCK_M divides 128), for K block kb.
  static FP8JIT_DEVICE const float* tile_scale_a(const GemmParams& p, const GemmUnit& w, int kb) {
    return p.scale_a + (w.row0 / 128) * p.sa_rs + kb * p.sa_cs;
  }

  // Block scaling: the scales of the 128-wide blocks of B holding the tile's first and last
  // column (past the edge of B: its last block), for the stage's kScalesB and kScalesB + 1.
  // Grouped layouts: each group's B has its own scales, sb_gs floats apart.
  static FP8JIT_DEVICE void load_block_scales_b(const GemmParams& p, const GemmUnit& w, int kb, float (&sb)[2]) {
    const int last = (p.N - 1) / 128;
    const int lo = min(w.tn * BLOCK_N / 128, last), hi = min((w.tn * BLOCK_N + BLOCK_N - 1) / 128, last);
    const float* base = p.scale_b + w.group * p.sb_gs + kb * p.sb_cs;
    sb[0] = __ldg(base + lo * p.sb_rs);
    sb[1] = __ldg(base + hi * p.sb_rs);
  }
  // Block scaling's scales of B for K block kb by TMA from tma_sb (swapped block scaling: the
  // tile's one scale of its A, from tma_sa), where the host encoded a map of the 128x128 blocks
  // (GemmParams::sb_map). A box's first element must sit on 16 bytes, so the box starts at the
  // 4-aligned index of the map's inner dimension at or before the one needed; the consumers read
  // at block_scale_offset in it, and a second block's scale sb_hi further. Past the edges TMA
  // fills zeros, which only columns past N would read. Dense launches only (no per-group offset).
  static FP8JIT_DEVICE int scale_block_of(const GemmUnit& w) {
    return SCALE == kSwappedBlockScale ? w.row0 / 128 : w.tn * BLOCK_N / 128;
  }
  static FP8JIT_DEVICE void load_block_scales_tma(const GemmParams& p, float* dst, u64* bar,
                                                  const GemmUnit& w, int kb) {
    if constexpr (SCALE == kBlockScale || SCALE == kSwappedBlockScale) {
      const bool swapped = SCALE == kSwappedBlockScale;
      const TensorMap* map = swapped ? &p.tma_sa : &p.tma_sb;
      float* to = swapped ? dst : dst + kScalesB;
      if (p.sb_map == kScaleMapKInner)
        tma::load_2d(to, map, bar, kb & ~3, scale_block_of(w));
      else
        tma::load_2d(to, map, bar, scale_block_of(w) & ~3, kb);
    }
  }
  // Where K block kb's scale (the tile's first block's) sits among those load_block_scales_tma
  // staged, 0 where the producer stored it itself (sb_map 0): block_scale_offset per K block, or
  // (at + kb * per_kb) & 3 from block_scale_at per tile (Sm90GemmConsumer::At::sb_at says which
  // loop takes which).
  static FP8JIT_DEVICE int block_scale_offset(const GemmParams& p, const GemmUnit& w, int kb) {
    return p.sb_map == kScaleMapKInner       ? kb & 3
           : p.sb_map == kScaleMapBlockInner ? scale_block_of(w) & 3
                                             : 0;
  }
  static FP8JIT_DEVICE void block_scale_at(const GemmParams& p, const GemmUnit& w, int& at,
                                           int& per_kb) {
    at = p.sb_map == kScaleMapBlockInner ? scale_block_of(w) & 3 : 0;
    per_kb = p.sb_map == kScaleMapKInner ? 1 : 0;
  }
  // The same by cp.async, word `lane` of the two (GemmParams::sb_hi = 1).
  static FP8JIT_DEVICE void stage_block_scales_b(const GemmParams& p, float* dst, const GemmUnit& w, int kb,
                                                 int lane) {
    if (lane < 2) {
      const int nb = min((w.tn * BLOCK_N + lane * (BLOCK_N - 1)) / 128, (p.N - 1) / 128);
      async_copy::word(dst + kScalesB + lane, p.scale_b + w.group * p.sb_gs + nb * p.sb_rs + kb * p.sb_cs, true);
    }
  }

  // The same by cp.async, for scale layouts TMA cannot read; rows and columns past the edge read
  // as 0. Block scaling puts the second block's scale at index 1 (GemmParams::sb_hi); swapped
  // block scaling copies the tile's one scale of its A from lane 0.
  static FP8JIT_DEVICE void stage_scales(const GemmParams& p, float* dst, const GemmUnit& w, int kb, int lane) {
    if constexpr (SCALE == kSwappedBlockScale) {
      if (lane == 0) async_copy::word(dst, tile_scale_a(p, w, kb), true);
    } else {
#pragma unroll
      for (int i = lane; i < BLOCK_M; i += 32) {
        const int row = w.row0 + i;
        async_copy::word(dst + i, p.scale_a + (row < p.M ? row * p.sa_rs + kb * p.sa_cs : 0),
                         row < p.M);
      }
    }
    if constexpr (SCALE == kBlockScale) {
      stage_block_scales_b(p, dst, w, kb, lane);
    } else {
#pragma unroll
      for (int i = lane; i < BLOCK_N; i += 32) {
        const int col = w.tn * BLOCK_N + i;
        async_copy::word(dst + kScalesB + i, p.scale_b + (col < p.N ? col * p.sb_rs + kb * p.sb_cs : 0), col < p.N);
      }
    }
  }
};

}  // namespace dev
}  // namespace fp8jit
