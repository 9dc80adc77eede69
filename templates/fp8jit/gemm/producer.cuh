// The producer warp of a GEMM kernel (Sm90Fp8Gemm): TMA loads of A's and B's tiles, and of the
// scales each K block needs, into the ring of stages the consumers read.
#pragma once

#include "fp8jit/common/async_copy.cuh"
#include "fp8jit/common/barrier.cuh"
#include "fp8jit/common/memory.cuh"
#include "fp8jit/common/tma.cuh"
#include "fp8jit/gemm/kernel_traits.cuh"

namespace fp8jit {
namespace dev {

template <class T>
struct Sm90GemmProducer : T {
  using typename T::ScaleLoads, typename T::Scheduler, typename T::Smem, T::BLOCK_K, T::SCALE,
      T::block_scale_map, T::kBoxRowsA, T::kBoxRowsB, T::kScalesB, T::kScalesBByLane0, T::kShareA,
      T::kShareB, T::kStageA, T::kStageB, T::kStageScales, T::kStagedScales, T::kStages;

  // Threads that run the producer: one, elected, wherever TMA brings A's scales and B's need at
  // most one load (the whole producer then sits in uniform registers: ~30 instructions per stage
  // at 64x32 instead of ~95 with `lane == 0` tests, which starved narrow decode tiles); lanes 0-1
  // where B's two block scales go by cp.async (one thread holding both addresses spilt at 40
  // registers in clusters); the whole warp where every scale does (scale layouts TMA cannot
  // read). Each lane that copies arrives once its copies land.
  static FP8JIT_DEVICE int producer_lanes(const GemmParams& p) {
    if constexpr (!kStagedScales) return 1;
    return !p.scale_tma ? 32 : b_scales_by_cp_async(p) ? 2 : 1;
  }
  static FP8JIT_DEVICE bool b_scales_by_cp_async(const GemmParams& p) {
    return p.scale_tma && SCALE == kBlockScale && !kScalesBByLane0 && !block_scale_map(p);
  }
  // Swapped block scaling with B's scales by TMA and no map of its A's blocks: the producer
  // copies the tile's scale of A with cp.async and arrives once it lands, for the reason
  // kScalesBByLane0 spares small tiles: a load waited for before each stage paced the producer
  // (16x5120x25600 block 60.1 µs against 44.0 per tensor on an H200, G64).
  static FP8JIT_DEVICE bool a_scale_by_cp_async(const GemmParams& p) {
    return p.scale_tma && SCALE == kSwappedBlockScale && !block_scale_map(p);
  }
  static FP8JIT_DEVICE u32 full_arrivals(const GemmParams& p) {
    const int lanes = producer_lanes(p);
    return lanes > 1 ? 1 + lanes : b_scales_by_cp_async(p) || a_scale_by_cp_async(p) ? 2 : 1;
  }

  // kOne: run by one elected thread (producer_lanes == 1), else by the whole warp.
  template <bool kOne>
  static FP8JIT_DEVICE void producer(const GemmParams& p, const Smem& s, int rank) {
    const int lane = kOne ? 0 : threadIdx.x % 32;
    int stage = 0;
    u32 phase = 0;
    Scheduler tiles(p, rank);
    for (GemmUnit w; take(tiles, w);) {
      for (int kb = w.first; kb < w.last; ++kb) {
        float sb[2];
        if constexpr (kScalesBByLane0)
          if (p.scale_tma && !block_scale_map(p)) ScaleLoads::load_block_scales_b(p, w, kb, sb);
        barrier::wait(&s.empty[stage], phase ^ 1);
        float* scales = s.scales + stage * kStageScales;
        if (lane == 0) {
          if constexpr (kScalesBByLane0)
            if (p.scale_tma && !block_scale_map(p)) {
              store_shared_f32(scales + kScalesB, sb[0]);
              store_shared_f32(scales + kScalesB + 1, sb[1]);
            }
          barrier::arrive_expect_tx(&s.full[stage], kStageA + kStageB + p.scale_tx);
          load_operands(p, s, stage, w, kb, rank);
          if constexpr (kStagedScales)
            if (p.scale_tma) {
              ScaleLoads::load_scales_tma(p, scales, &s.full[stage], w, kb);
              if (block_scale_map(p))
                ScaleLoads::load_block_scales_tma(p, scales, &s.full[stage], w, kb);
            }
        }
        if constexpr (kStagedScales) {
          // Lanes > 1 only where producer_lanes says so, hence never in the one-thread build.
          const bool warp_copies = !kOne && (!p.scale_tma || b_scales_by_cp_async(p));
          if (!kOne && !p.scale_tma)
            ScaleLoads::stage_scales(p, scales, w, kb, lane);
          else if (!kOne && b_scales_by_cp_async(p))
            ScaleLoads::stage_block_scales_b(p, scales, w, kb, lane);
          else if (a_scale_by_cp_async(p))
            async_copy::word(scales, ScaleLoads::tile_scale_a(p, w, kb), true);
          if (warp_copies || a_scale_by_cp_async(p)) async_copy::arrive_on(&s.full[stage]);
        }
        if (++stage == kStages) {
          stage = 0;
          phase ^= 1;
        }
      }
    }
  }

  // The next unit: a dense schedule's by the host's divisors (DenseTileScheduler::next<true>).
  static FP8JIT_DEVICE bool take(Scheduler& tiles, GemmUnit& w) {
    if constexpr (Scheduler::kGrouped)
      return tiles.next(w);
    else
      return tiles.template next<true>(w);
  }

  // K block kb's tiles of A and B into `stage`; in a cluster, this CTA's half of the shared
  // operand goes to both CTAs (the stage's bytes are the same either way).
  static FP8JIT_DEVICE void load_operands(const GemmParams& p, const Smem& s, int stage,
                                          const GemmUnit& w, int kb, int rank) {
    u8* a = s.a + stage * kStageA;
    u8* b = s.b + stage * kStageB;
    if constexpr (kShareA)
      tma::load_2d_multicast(a + rank * kBoxRowsA * BLOCK_K, &p.tma_a, &s.full[stage], kb * BLOCK_K,
                             w.row0 + rank * kBoxRowsA, 0x3);
    else
      tma::load_2d(a, &p.tma_a, &s.full[stage], kb * BLOCK_K, w.row0);
    if constexpr (kShareB) {
      if (w.shared) {
        tma::load_2d_multicast(b + rank * kBoxRowsB * BLOCK_K, &p.tma_b, &s.full[stage],
                               kb * BLOCK_K, w.b_row0 + rank * kBoxRowsB, 0x3);
      } else {  // the map's box is half the tile: both halves, into this CTA only
        tma::load_2d(b, &p.tma_b, &s.full[stage], kb * BLOCK_K, w.b_row0);
        tma::load_2d(b + kBoxRowsB * BLOCK_K, &p.tma_b, &s.full[stage], kb * BLOCK_K,
                     w.b_row0 + kBoxRowsB);
      }
    } else
      tma::load_2d(b, &p.tma_b, &s.full[stage], kb * BLOCK_K, w.b_row0);
  }
};

}  // namespace dev
}  // namespace fp8jit
