// The compile-time decisions of one GEMM kernel (Sm90Fp8Gemm): warpgroups, tile and stage
// geometry, the shared-memory layout, and which producer, K-loop and epilogue paths it builds,
// each with the measurement that chose it. The producer (producer.cuh), the consumer warpgroups
// (consumer.cuh) and the kernel (sm90_fp8_gemm.cuh) derive from it.
#pragma once

#include "fp8jit/common/cluster.cuh"
#include "fp8jit/common/warpgroup.cuh"
#include "fp8jit/gemm/epilogue.cuh"
#include "fp8jit/gemm/geometry.cuh"
#include "fp8jit/gemm/params.cuh"
#include "fp8jit/gemm/promotion.cuh"
#include "fp8jit/gemm/scale_loads.cuh"
#include "fp8jit/gemm/split_sum.cuh"

namespace fp8jit {
namespace dev {

template <int BLOCK_M_, int BLOCK_N_, int kStages_, int SCALE_, int OUT_, int FA_, int FB_,
          bool kBias_, int GROUP_M_, bool kFastAccum_, int CLUSTER_M_, int CLUSTER_N_,
          bool kTmaEpilogue_, bool kSwapAB_, class Scheduler_>
struct Sm90GemmTraits {
  static constexpr int BLOCK_M = BLOCK_M_, BLOCK_N = BLOCK_N_, kStages = kStages_;
  static constexpr int SCALE = SCALE_, OUT = OUT_, FA = FA_, FB = FB_, GROUP_M = GROUP_M_;
  static constexpr int CLUSTER_M = CLUSTER_M_, CLUSTER_N = CLUSTER_N_;
  static constexpr bool kBias = kBias_, kFastAccum = kFastAccum_, kTmaEpilogue = kTmaEpilogue_;
  static constexpr bool kSwapAB = kSwapAB_;
  using Scheduler = Scheduler_;
  // Warpgroups, column chunks, the shared-memory layout and split-K summing, as the host computes
  // them from the same config (geometry.cuh).
  using Geometry = GemmGeometryOf<BLOCK_M, BLOCK_N, kStages, SCALE, ElemSize<OUT>::value,
                                  kFastAccum, kBias, CLUSTER_M, CLUSTER_N, Scheduler::kGrouped,
                                  kTmaEpilogue>;
  static constexpr int BLOCK_K = kGemmBlockK;  // bytes of K per stage: one 128-byte swizzle atom
  static constexpr int kMathWGs = Geometry::get().math_wgs;
  static constexpr int kRowsPerWG = Geometry::get().rows_per_wg;
  static constexpr int kMmaM = Geometry::get().mma_m;  // m64 wgmmas per warpgroup and k-step
  static constexpr int kThreads = Geometry::get().threads;
  static_assert(kThreads == warpgroup::kThreads * (kMathWGs + 1), "one producer warpgroup");
  static constexpr int kAccum = BLOCK_N / 2;  // fp32 accumulators per thread per m64
  // Fast accumulation (tensor and rowwise scaling only) keeps the whole K sum in the tensor
  // cores' accumulators, as cuBLASLt's FAST_ACCUM does: fewer registers, larger tiles, ~2e-3
  // relative error at K = 7168. Otherwise every 128 of K is promoted into FP32 registers.
  static constexpr bool kPromote = !kFastAccum;
  // Precise accumulation of tiles wider than 208 columns (one m64 slab per warpgroup) runs in two
  // column halves (GemmGeometry::chunks). Block scaling needs BLOCK_N = 256 here: each half is one
  // 128-block of B.
  static constexpr int kChunks = Geometry::get().chunks;
  static constexpr int kChunkN = Geometry::get().chunk_n;
  static constexpr int kChunkAccum = kChunkN / 2;
  static_assert(kChunkN % 8 == 0, "a chunk is a valid wgmma N");
  // 256-row tiles too wide for both slabs' temporaries promote their m64 slabs in turn
  // (GemmGeometry::slab_passes): each K block runs kPasses batches of wgmmas (column chunks or
  // slabs), each promoted before the next is issued; the temporaries cover kAccSlabs slabs.
  static constexpr bool kSlabPasses = Geometry::get().slab_passes;
  static constexpr int kPasses = Geometry::get().passes;
  static constexpr int kAccSlabs = kSlabPasses ? 1 : kMmaM;
  // The next K block's full barrier is probed (mbarrier.test_wait) before this block's promotion,
  // whose FFMAs cover the probe's latency; a stage seen full costs the next block no wait (3 % on
  // 256x128 block tiles, 1-2 % per tensor). A blocking wait there held the promotion back (3-13 %
  // slower). 128-row block tiles ran slower with the probe (128x256 by 2.5 %, 128x192 by up to
  // 0.6 %), and fast accumulation has no promotion to hide it under: both keep the plain wait.
  static constexpr bool kProbeNextStage = kPromote && (kSlabPasses || SCALE != kBlockScale);
  static_assert(kChunks == 1 || SCALE != kBlockScale || BLOCK_N == 256,
                "block scaling: each half one block of B");
  static_assert(!kFastAccum || SCALE == kPerTensor || SCALE == kPerRow,
                "block and group scaling apply their scales when promoting: no fast accumulation");
  static constexpr int kStageA = Geometry::get().stage_a, kStageB = Geometry::get().stage_b;
  // Scales staged per stage (GemmGeometry::stage_scales floats): A's, then B's from A's
  // BLOCK_M x 4 bytes on.
  static constexpr bool kStagedScales = SCALE == kBlockScale || gemm_scales_per_column(SCALE);
  // Swapped operands (config swap_ab: D^T = B A^T, for decode-sized M): the problem's N fills the
  // tile's rows, the wgmma's 64-row side, and its few rows of A the tile's 8-16 columns, so a
  // stage carries 8-16 rows of A instead of 64 (G64: 1x6144x4096 per tensor 17.3 -> 14.7 µs on
  // an H200). The host passes the swapped problem (M = the problem's N, A = its B, their scales
  // swapped) and D as it is: the epilogue stores element (i, j) at D[j][i], by direct stores.
  static_assert(!kSwapAB || (CLUSTER_M * CLUSTER_N == 1 && BLOCK_M <= 128 && !Scheduler::kGrouped &&
                             !kTmaEpilogue),
                "swapped operands: dense, no cluster, tiles in one 128-row block, direct stores");
  static_assert((SCALE == kSwappedBlockScale) <= kSwapAB,
                "swapped block scaling swaps the operands");
  static constexpr int kStageScales = Geometry::get().stage_scales;
  // Per consumer warpgroup, its slab of D staged for the TMA store.
  static constexpr int kEpiSlab = Geometry::get().epi_slab;
  // NOTE: producer 40 / consumers 232 registers fills the 64K register file at 384 threads.
  static constexpr int kProducerRegs = 40;
  static constexpr int kConsumerRegs = kMathWGs == 2 ? 232 : 240;
  static_assert(BLOCK_M == 64 || BLOCK_M == 128 || BLOCK_M == 256,
                "BLOCK_M must be 64, 128 or 256");
  static_assert(BLOCK_N % 8 == 0 && BLOCK_N >= 8 && BLOCK_N <= 256,
                "BLOCK_N: a multiple of 8 in [8, 256]");
  static_assert(kStageB % 1024 == 0, "stages must stay 1024-byte aligned for the 128-byte swizzle");
  // 2-CTA clusters: the pair computes neighbouring tiles along N (CLUSTER_N = 2: same rows of
  // A) or along M (CLUSTER_M = 2: same columns of B). Each CTA loads half of the shared
  // operand's tile and multicasts it to both, halving that operand's L2 traffic; a stage is
  // refilled only when the consumers of both CTAs have released it.
  static constexpr int kCluster = Geometry::get().cluster;
  static constexpr bool kShareA = CLUSTER_N == 2, kShareB = CLUSTER_M == 2;
  static constexpr int kBoxRowsA = Geometry::get().box_rows_a;
  static constexpr int kBoxRowsB = Geometry::get().box_rows_b;
  static_assert(kCluster == 1 || kCluster == 2, "clusters of 1 or 2 CTAs, along M or N");
  static_assert(kBoxRowsB % 8 == 0, "half of B's tile must keep whole 8-row swizzle atoms");
  static_assert(kEpiSlab % 1024 == 0, "the scales after the slabs must stay 128-byte aligned");

  static constexpr int smem_bytes() { return Geometry::get().smem_bytes; }

  struct Smem {
    u8* a;
    u8* b;
    float* scales;  // kStages x kStageScales: A's, then B's
    u64* full;
    u64* empty;
    u8* epi;  // kMathWGs slabs of kEpiSlab bytes, 1024-byte aligned
  };

  static FP8JIT_DEVICE Smem carve(u8* raw) {
    Smem s;
    u8* base = reinterpret_cast<u8*>((reinterpret_cast<u64>(raw) + 1023) & ~u64(1023));
    s.a = base;
    s.b = base + kStages * kStageA;
    // The epilogue slabs follow the 1024-byte multiples of the stages: their swizzled chunks need
    // 256-byte alignment, and the scales after them keep the 128 bytes TMA destinations need.
    s.epi = s.b + kStages * kStageB;
    s.scales = reinterpret_cast<float*>(s.epi + kMathWGs * kEpiSlab);
    s.full = reinterpret_cast<u64*>(s.scales + kStages * kStageScales);
    s.empty = s.full + kStages;
    return s;
  }

  static FP8JIT_DEVICE int cta_rank() {
    return kCluster == 1 ? 0 : static_cast<int>(cluster::rank());
  }

  // Block scaling with A's scales by TMA and B's not (GemmParams::sb_map == 0): the producer
  // loads B's two block scales of a K block before it waits for the stage to be free (the load's
  // latency hides behind that wait) and stores them into the stage before its expect_tx arrival,
  // whose release publishes them to the consumers. Not in clusters: the producer's 40 registers
  // then spill. Not for tiles of 128x64 and smaller either: their consumers finish a K block in
  // less than the load's round trip, which then paces the producer (one stage per ~600 cycles,
  // G30); cp.async keeps several in flight.
  static constexpr bool kScalesBByLane0 =
      SCALE == kBlockScale && kCluster == 1 && BLOCK_M * BLOCK_N > 128 * 64;
  // Block scaling's scales of B (swapped: the tile's one of its A) by TMA from a map of the
  // 128x128 blocks (GemmParams::sb_map): dense launches whose scale layout TMA can read.
  static constexpr bool kBlockScaleMaps =
      !Scheduler::kGrouped && (SCALE == kBlockScale || SCALE == kSwappedBlockScale);
  static FP8JIT_DEVICE bool block_scale_map(const GemmParams& p) {
    return kBlockScaleMaps && p.sb_map != 0;
  }

  // B's scales follow A's among a stage's (A's cover 4 rows more for grouped tiles).
  static constexpr int kScalesB = Geometry::get().scales_a;
  static constexpr bool kAlignA = kScalesB > BLOCK_M;
  using ScaleLoads =
      Sm90GemmScaleLoads<BLOCK_M, BLOCK_N, SCALE, kScalesB, kAlignA, Geometry::get().scale_box_a>;
  using Promotion = Sm90GemmPromotion<BLOCK_M, BLOCK_N, kMmaM, kChunks, SCALE>;
  using BlockScales = typename Promotion::BlockScales;

  // The launch's epilogue. A kernel built for TMA epilogues (config epilogue = tma, which the host
  // picks where K is not split, gemm_epilogue_for) holds only that path: no split-K partials or
  // in-cluster sums and no direct stores. That halves its code (block 128x256: 4456 -> 2208 SASS
  // instructions) and cuts its NVRTC time 1.5-2.6x; the host launches it only where D takes TMA
  // stores and K is one range, and Sm90Fp8Gemm::run traps on any other launch.
  static FP8JIT_DEVICE bool tma_store(const GemmParams& p) { return kTmaEpilogue || p.tma_store; }
  static FP8JIT_DEVICE int splits(const GemmParams& p) { return kTmaEpilogue ? 1 : p.splits; }
  // Whether the epilogue's store loop writes the slab for a TMA store: known at compile time in
  // tma builds with swizzled slabs only. With row-major slabs, a store loop without the run-time
  // test let ptxas hoist the slab's addresses out of it and spill (per tensor 128x176: 224 bytes,
  // 128x208: 400; fast 128x240: 136), as in G54's split loops.
  static FP8JIT_DEVICE bool store_by_tma(const GemmParams& p) {
    return (kTmaEpilogue && Geometry::get().swizzled_slab) || p.tma_store;
  }
  static FP8JIT_DEVICE bool split_cluster(const GemmParams& p) {
    return !kTmaEpilogue && p.split_cluster;
  }
  // K block kb's wgmmas issued before kb - 1's are waited for, into a second set of temporaries
  // (or, with fast accumulation, of sums): Sm90GemmConsumer, GemmGeometry::pipelined. With two
  // math warpgroups each then keeps the tensor cores busy by itself, so they run free: 128x128
  // at 4096x4096x7168 (H200, CUDA events) block 205.7 -> 185.0 µs, per tensor 187.7 -> 171.8
  // (its default then, 128x208, took 177.9); 8192^3 block 919 -> 840.
  static constexpr bool kPipelinedKLoop = Geometry::get().pipelined;
  static constexpr bool kSplitAsData = Geometry::get().split_as_data;
  // Two consumer warpgroups take turns issuing their wgmmas, one K block at a time (hardware
  // barriers kTurnBarrier + wg; 1 and 2 are the epilogue's). Issued together, the two batches
  // interleave on the tensor cores, finish together, and both warpgroups then promote while the
  // tensor cores idle; in turns, one warpgroup's promotion (and epilogue) runs under the other's
  // MMAs. Warpgroup 1 opens with an arrival so that warpgroup 0 goes first, and warpgroup 0
  // closes with the matching wait, leaving both barriers balanced at exit. Not where promotion
  // is pipelined: there turns only held each warpgroup's next wgmmas back.
  static constexpr bool kTakeTurns = kMathWGs == 2 && !kPipelinedKLoop;
  static constexpr int kTurnBarrier = 3;
  static constexpr int kTurnThreads = 2 * warpgroup::kThreads;

  // Split-K inside a cluster (GemmParams::split_cluster): a tile's partials are summed through
  // the drained stages, which must hold one FP32 tile (the host reads the same geometry).
  static constexpr bool kCanSumSplitsInCluster = Geometry::get().sums_splits_in_cluster;
  using SplitSum = ClusterSplitSum<kMathWGs * warpgroup::kThreads, kMmaM * kAccum>;

  using Epilogue =
      Sm90GemmEpilogue<BLOCK_N, kMmaM, kRowsPerWG, SCALE, OUT, kBias, Scheduler::kGrouped,
                       Geometry::get().swizzled_slab, kSwapAB,
                       Geometry::get().swizzled_slab ? Geometry::get().panel_bytes : 128>;

  // A tile's 16-bit D waits in registers, packed, until the next tile's first wgmmas are issued
  // and is written and stored while they run (fast accumulation packs before those wgmmas
  // overwrite its accumulators).
  // Only where the sums, the in-flight temporaries and the packed tile fit: ptxas spills past
  // 210 of them (128x176 and wider, 256x104).
  // Column halves (kChunks == 2) written out each under the other's wgmmas (Sm90GemmConsumer).
  // Not rowwise: its per-column scales in the epilogue spill 2-8 bytes with it (ptxas); nor per
  // tensor in grouped layouts, whose pending half's group (for its scale of B) spilt 8 bytes.
  static constexpr bool kOverlapHalves =
      kChunks == 2 && kPromote && SCALE != kPerRow && !(Scheduler::kGrouped && SCALE == kPerTensor);
  static_assert(!kOverlapHalves || !Scheduler::kGrouped || SCALE == kBlockScale,
                "a pending half's TileOut carries no per-group scale of B");
  // Two warpgroups taking turns: the warpgroup index read from lane 0 (__shfl_sync) is
  // warp-uniform to ptxas, which then keeps what derives from it (the turn barriers' ids, stage
  // addresses, descriptors) in uniform registers: K loops 4-20 % shorter in SASS, per tensor
  // 128x144-128x208 tiles 1.7-5.5 % faster, grouped 128x256 4-5 %. Not for dense column halves
  // (the dense block 128x256 kernel ran 2.6-3 % slower with it) nor for one math warpgroup (64-row
  // tiles, no turns: 0.6-1.6 % slower on decode shapes).
  static constexpr bool kUniformWarpgroup = kTakeTurns && (Scheduler::kGrouped || !kOverlapHalves);
  // Fast accumulation packs its wgmma accumulators themselves. ptxas (CUDA 13.0) spilt, fast, at
  // 128x240 per tensor, from 128x208 rowwise with a bias, and at every 256-row tile (two slabs of
  // sums and their packed copy); per tensor up to 128x224 and rowwise up to 128x192 it did not.
  // Per tensor 128x232 with a bias fitted until the one-thread producer (G65) moved ptxas's
  // allocation by a register (8 bytes spilt), so per tensor stops at 224 columns (3N/4 = 168).
  // Pipelined promotion counts its second set of temporaries: deferring beside it spilt block
  // 128x128 and 64x128, and per tensor 128x128, which fitted, ran 0.5-2.5 % slower deferred
  // (H200: 4096x24576x1536 246.5 against 252.6 µs).
  static constexpr int kDeferRegisters = kPromote           ? 210
                                         : kMmaM > 1        ? 0
                                         : SCALE == kPerRow ? 144
                                                            : 168;
  static constexpr bool kDeferEpilogue =
      Epilogue::kCanPack && !kSwapAB &&
      kMmaM * (kAccum + Epilogue::kPacked) +
              ((kPromote ? 1 : 0) + (kPipelinedKLoop ? 1 : 0)) * kAccSlabs * kChunkAccum <=
          kDeferRegisters - (Scheduler::kGrouped ? kGemmGroupedRegisters : 0);
};

}  // namespace dev
}  // namespace fp8jit
