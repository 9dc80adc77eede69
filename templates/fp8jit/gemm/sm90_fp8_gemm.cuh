// Scaled FP8 GEMM for Hopper: D[M, N] = (A[M, K] * sA) . (B[N, K] * sB)^T (+ bias[N]).
//
// Warp-specialised and persistent: one producer warp issues TMA loads of A and B tiles into a
// ring of kStages shared-memory stages guarded by mbarriers; one or two consumer warpgroups issue
// FP8 wgmma.mma_async on them, taking turns unless each pipelines its own promotion. Each CTA (or
// 2-CTA cluster, which multicasts the operand its pair shares) works on the units its tile
// scheduler hands out (scheduler.cuh: the dense grid in grouped, L2-friendly order; grouped
// layouts plug in other schedulers).
// Block scaling promotes: every 128 of K, the wgmma accumulators are scaled and added into FP32
// registers, which applies the per-block scales and sidesteps the tensor cores' limited FP8
// accumulation precision. The producer warp stages each K block's scales into shared memory with
// the stage (cp.async completing on the stage's full barrier), so no consumer ever waits on a
// global load: a global load in flight at a wgmma.fence stalls the fence until it lands.
// The kernel joins three parts: kernel_traits.cuh (the compile-time decisions and the shared-memory
// layout), producer.cuh (the producer warp) and consumer.cuh (the math warpgroups).
#pragma once

#include "fp8jit/common/barrier.cuh"
#include "fp8jit/common/cluster.cuh"
#include "fp8jit/common/grid_dependency.cuh"
#include "fp8jit/common/tma.cuh"
#include "fp8jit/common/warpgroup.cuh"
#include "fp8jit/gemm/consumer.cuh"
#include "fp8jit/gemm/grouped_scheduler.cuh"
#include "fp8jit/gemm/indexed_scheduler.cuh"
#include "fp8jit/gemm/kernel_traits.cuh"
#include "fp8jit/gemm/producer.cuh"
#include "fp8jit/gemm/scheduler.cuh"

namespace fp8jit {
namespace dev {

template <int BLOCK_M, int BLOCK_N, int kStages, int SCALE, int OUT, int FA, int FB, bool kBias,
          int GROUP_M, bool kFastAccum, int CLUSTER_M = 1, int CLUSTER_N = 1,
          bool kTmaEpilogue = false, bool kSwapAB = false,
          class Scheduler = DenseTileScheduler<BLOCK_M, BLOCK_N, GROUP_M, CLUSTER_M, CLUSTER_N>>
struct Sm90Fp8Gemm
    : Sm90GemmTraits<BLOCK_M, BLOCK_N, kStages, SCALE, OUT, FA, FB, kBias, GROUP_M, kFastAccum,
                     CLUSTER_M, CLUSTER_N, kTmaEpilogue, kSwapAB, Scheduler> {
  using Traits = Sm90GemmTraits<BLOCK_M, BLOCK_N, kStages, SCALE, OUT, FA, FB, kBias, GROUP_M,
                                kFastAccum, CLUSTER_M, CLUSTER_N, kTmaEpilogue, kSwapAB, Scheduler>;
  using Producer = Sm90GemmProducer<Traits>;
  using Consumer = Sm90GemmConsumer<Traits>;
  using typename Traits::Smem, Traits::block_scale_map, Traits::carve, Traits::cta_rank,
      Traits::kCanSumSplitsInCluster, Traits::kCluster, Traits::kConsumerRegs, Traits::kMathWGs,
      Traits::kProducerRegs, Traits::kStagedScales, Traits::kUniformWarpgroup, Traits::smem_bytes;

  static FP8JIT_DEVICE void run(const GemmParams& p, u8* raw_smem) {
    u32 dynamic_smem;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dynamic_smem));
    // What the host guarantees, checked where host and device would disagree (fail loudly): the
    // shared-memory layout; splits summed in a cluster need one work unit per CTA (the stages
    // hold the partial once drained) and a kernel that can hold it; the tma build serves only
    // what Traits::tma_store says; swapped operands write D transposed by direct stores (no slab,
    // no workspace partials); a dense schedule's divisors are its own (GemmParams::schedule).
    // One branch for all: a branch per check made each one's parameter loads wait for the
    // branch before it, rounds of constant-cache misses ahead of the barrier's set-up and the
    // producer's first load.
    const bool split_cluster = p.split_cluster != 0;
    const bool bad = (dynamic_smem < smem_bytes()) |
                     (split_cluster & (!kCanSumSplitsInCluster | !Scheduler::holds_every_unit(p))) |
                     (kTmaEpilogue & ((p.splits != 1) | (p.tma_store == 0))) |
                     (kSwapAB & ((p.tma_store != 0) | ((p.splits > 1) & !split_cluster))) |
                     !Scheduler::schedule_matches(p);
    if (bad) __trap();
    const Smem s = carve(raw_smem);
    // See kUniformWarpgroup.
    const int wg = kUniformWarpgroup
                       ? __shfl_sync(~0u, static_cast<int>(threadIdx.x / warpgroup::kThreads), 0)
                       : static_cast<int>(threadIdx.x / warpgroup::kThreads);
    if (threadIdx.x == 0) {
      tma::prefetch(&p.tma_a);
      tma::prefetch(&p.tma_b);
      if (kStagedScales && (SCALE != kSwappedBlockScale || block_scale_map(p)) && p.scale_tma)
        tma::prefetch(&p.tma_sa);
      if ((gemm_scales_per_column(SCALE) || block_scale_map(p)) && p.scale_tma)
        tma::prefetch(&p.tma_sb);
      // The full barriers' count once: called per stage, NVRTC re-read the launch parameters and
      // worked it out again for every stage, ahead of the CTA's first barrier, at which every
      // thread waits for this one (block 64x32 s16: 360 -> 139 instructions to that barrier,
      // 64x16 s6: 173 -> 99; kernels whose count is a constant are unchanged).
      const u32 full_arrivals = Producer::full_arrivals(p);
      for (int i = 0; i < kStages; ++i) {
        barrier::init(&s.full[i], full_arrivals);
        barrier::init(&s.empty[i],
                      kCluster * kMathWGs * 4);  // one arrival per consumer warp of the cluster
      }
      barrier::fence_init();
    }
    // In a cluster, no peer may multicast into this CTA or arrive on its barriers before they
    // are initialised, nor after it has exited: cluster-wide barriers at both ends.
    if constexpr (kCluster > 1)
      cluster::sync();
    else
      __syncthreads();
    // Everything above overlaps the previous kernel's tail under PDL; the operands, scales and D
    // are touched only below.
    enter_dependent_grid();
    const int rank = cta_rank();
    if (wg == kMathWGs) {  // the last warpgroup produces
      warpgroup::decrease_registers<kProducerRegs>();
      bool produced = false;
      if (threadIdx.x % warpgroup::kThreads < 32) {
        if (Producer::producer_lanes(p) > 1) {
          if constexpr (kStagedScales)
            if (threadIdx.x % 32 < Producer::producer_lanes(p)) {
              Producer::template producer<false>(p, s, rank);
              produced = true;
            }
        } else if (warpgroup::elect_one()) {
          Producer::template producer<true>(p, s, rank);
          produced = true;
        }
      }
      // Threads with nothing to do leave at once. The exit's cluster barrier waits only for
      // threads that have not exited (a CTA's shared memory lives while any of its threads
      // does), and idle warps and lanes parked at it for the whole kernel cost a pair 1-4 %
      // (H200, 128x256 in pairs sharing B: 4096x4096x7168 block 191.8 -> 184.1 µs, 8192^3 863.9
      // -> 829.7), the 31 idle lanes sharing the producer's warp.
      if (!produced) return;
    } else {
      warpgroup::increase_registers<kConsumerRegs>();
      Consumer::consumer(p, s, wg, rank);
    }
    if constexpr (kCluster > 1) cluster::sync();
  }
};

}  // namespace dev
}  // namespace fp8jit

#include "fp8jit/gemm/reduce.cuh"
#include "fp8jit/gemm/scale_columns.cuh"