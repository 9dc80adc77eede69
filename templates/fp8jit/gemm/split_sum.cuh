// Split-K summed inside a thread-block cluster: the `splits` K ranges of one output tile run on
// the CTAs of one cluster (rank = split), each holding its FP32 partial tile in registers. The
// other ranks leave theirs in their own shared memory, and rank 0 adds them in over distributed
// shared memory and runs the epilogue: no FP32 workspace in global memory and no second kernel,
// which cost a decode-sized GEMM ~8 µs of its ~28 (128x4096x7168 on an H100, G17).
#pragma once

#include "fp8jit/common/bulk_store.cuh"
#include "fp8jit/common/cluster.cuh"
#include "fp8jit/common/memory.cuh"

namespace fp8jit {
namespace dev {

// kThreads consumer threads, each holding kVals accumulators (a multiple of 4). The partial
// tile lies in shared memory as float4 rows of kThreads: thread t's quad q at (q * kThreads + t)
// * 4, so that a warp's 16-byte stores and remote loads are contiguous.
template <int kThreads, int kVals>
struct ClusterSplitSum {
  static_assert(kVals % 4 == 0, "accumulators come in quads");
  static constexpr int kBytes = kThreads * kVals * 4;
  static constexpr int kBarrier = 5;  // 1-2: the epilogue's slabs, 3-4: the consumers' turns

  // Element i of the accumulators in row-major order; i is a constant once the loops unroll, so
  // the array stays in registers.
  template <int M, int A>
  static FP8JIT_DEVICE float& at(float (&v)[M][A], int i) {
    return v[i / A][i % A];
  }

  // Sums the cluster's partials into rank 0's `v`; `scratch` (kBytes of this CTA's shared
  // memory) must be free: the host launches this only with one unit per CTA, so that the stages
  // are drained once the last wgmma is done. Every consumer thread of the cluster calls it, then
  // finish() before exiting, and the peers leave `scratch` alone in between. Returns whether
  // this CTA holds the sum.
  template <int M, int A>
  static FP8JIT_DEVICE bool run(float (&v)[M][A], float* scratch, int tid, int split, int splits) {
    static_assert(M * A == kVals, "accumulator shape");
    // Every consumer warpgroup of this CTA is past its last wgmma before any of them overwrites
    // the stages.
    named_barrier_sync(kBarrier, kThreads);
    if (split != 0) {
#pragma unroll
      for (int q = 0; q < kVals / 4; ++q)
        store_shared_v4(scratch + (q * kThreads + tid) * 4, at(v, 4 * q), at(v, 4 * q + 1),
                        at(v, 4 * q + 2), at(v, 4 * q + 3));
    }
    cluster::sync();  // release: the partials are visible to rank 0
    if (split == 0) {
      // Fixed order (rank 1, 2, ...): the sum does not depend on timing.
      for (int r = 1; r < splits; ++r) {
        const u32 remote = cluster::map_shared(scratch, static_cast<u32>(r));
#pragma unroll
        for (int q = 0; q < kVals / 4; ++q) {
          const float4 x = cluster::load_shared_v4(remote + (q * kThreads + tid) * 16);
          at(v, 4 * q) += x.x;
          at(v, 4 * q + 1) += x.y;
          at(v, 4 * q + 2) += x.z;
          at(v, 4 * q + 3) += x.w;
        }
      }
    }
    return split == 0;
  }

  // Called by every consumer thread of the cluster after run, before it exits: the peers' partials
  // stay alive until rank 0 has read them. Here, after rank 0's epilogue, rather than right after
  // the reads: there the barrier's GPU-scope fence and cluster round trip stood in front of the
  // epilogue, here they overlap the last TMA store's drain.
  static FP8JIT_DEVICE void finish() { cluster::sync(); }
};

}  // namespace dev
}  // namespace fp8jit
