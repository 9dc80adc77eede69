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
#pragma once

#include "fp8jit/common/async_copy.cuh"
#include "fp8jit/common/barrier.cuh"
#include "fp8jit/common/bulk_store.cuh"
#include "fp8jit/common/cluster.cuh"
#include "fp8jit/common/convert.cuh"
#include "fp8jit/common/grid_dependency.cuh"
#include "fp8jit/common/memory.cuh"
#include "fp8jit/common/tma.cuh"
#include "fp8jit/common/warpgroup.cuh"
#include "fp8jit/gemm/epilogue.cuh"
#include "fp8jit/gemm/geometry.cuh"
#include "fp8jit/gemm/grouped_scheduler.cuh"
#include "fp8jit/gemm/indexed_scheduler.cuh"
#include "fp8jit/gemm/params.cuh"
#include "fp8jit/gemm/promotion.cuh"
#include "fp8jit/gemm/scale_loads.cuh"
#include "fp8jit/gemm/scheduler.cuh"
#include "fp8jit/gemm/split_sum.cuh"

namespace fp8jit {
namespace dev {

// The FP8 wgmma of shape m64nNk32: specialised in the generated source for the variant's N and
// formats (the instruction spells out N/2 accumulator registers).
template <int N, int FA, int FB>
struct Wgmma;

template <int BLOCK_M, int BLOCK_N, int kStages, int SCALE, int OUT, int FA, int FB, bool kBias,
          int GROUP_M, bool kFastAccum, int CLUSTER_M = 1, int CLUSTER_N = 1,
          bool kTmaEpilogue = false, bool kSwapAB = false,
          class Scheduler = DenseTileScheduler<BLOCK_M, BLOCK_N, GROUP_M, CLUSTER_M, CLUSTER_N>>
struct Sm90Fp8Gemm {
  // Warpgroups, column chunks, the shared-memory layout and split-K summing, as the host computes
  // them from the same config (geometry.cuh).
  using Geometry = GemmGeometryOf<BLOCK_M, BLOCK_N, kStages, SCALE, ElemSize<OUT>::value,
                                  kFastAccum, kBias, CLUSTER_M, CLUSTER_N, Scheduler::kGrouped>;
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
    for (GemmUnit w; tiles.next(w);) {
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

  // Tells the producers that may refill `stage` (this CTA's, and in a cluster the peer's, whose
  // multicasts write here too) that this warp is done with it.
  static FP8JIT_DEVICE void release(const Smem& s, int stage) {
    if constexpr (kCluster == 1) {
      barrier::arrive(&s.empty[stage]);
    } else {
#pragma unroll
      for (int r = 0; r < kCluster; ++r) barrier::arrive_cluster(&s.empty[stage], r);
    }
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
  // stores and K is one range, and run() traps on any other launch.
  static FP8JIT_DEVICE bool tma_store(const GemmParams& p) {
    return kTmaEpilogue || p.tma_store;
  }
  static FP8JIT_DEVICE int splits(const GemmParams& p) {
    return kTmaEpilogue ? 1 : p.splits;
  }
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
  // Promotion under the next K block's wgmmas (consumer(), GemmGeometry::pipelined). With two
  // math warpgroups each then keeps the tensor cores busy by itself, so they run free: 128x128
  // at 4096x4096x7168 (H200, CUDA events) block 205.7 -> 185.0 µs, per tensor 187.7 -> 171.8
  // (its default then, 128x208, took 177.9); 8192^3 block 919 -> 840.
  static constexpr bool kPipelinePromotion = Geometry::get().pipelined;
  // Two consumer warpgroups take turns issuing their wgmmas, one K block at a time (hardware
  // barriers kTurnBarrier + wg; 1 and 2 are the epilogue's). Issued together, the two batches
  // interleave on the tensor cores, finish together, and both warpgroups then promote while the
  // tensor cores idle; in turns, one warpgroup's promotion (and epilogue) runs under the other's
  // MMAs. Warpgroup 1 opens with an arrival so that warpgroup 0 goes first, and warpgroup 0
  // closes with the matching wait, leaving both barriers balanced at exit. Not where promotion
  // is pipelined: there turns only held each warpgroup's next wgmmas back.
  static constexpr bool kTakeTurns = kMathWGs == 2 && !kPipelinePromotion;
  static constexpr int kTurnBarrier = 3;
  static constexpr int kTurnThreads = 2 * warpgroup::kThreads;

  static FP8JIT_DEVICE void consumer(const GemmParams& p, const Smem& s, int wg, int rank) {
    const int t_in_wg = threadIdx.x % warpgroup::kThreads;
    const int warp = t_in_wg / 32, lane = t_in_wg % 32;
    float acc[kAccSlabs][kChunkAccum];
    float out[kMmaM][kPromote ? kAccum : 1];
    int stage = 0;
    u32 phase = 0;
    Scheduler tiles(p, rank);
    if constexpr (kTakeTurns)
      if (wg == 1) named_barrier_arrive(kTurnBarrier, kTurnThreads);
    // Deferred epilogue: the previous tile's D, packed, and where it goes. Only where each CTA
    // runs three tiles or more: with two (decode-sized M, K = 512) block scaling lost ~1 µs of
    // 17 to it (G21), having little to hide the store under.
    const bool defer =
        kDeferEpilogue && tma_store(p) && (splits(p) == 1 || split_cluster(p)) &&
        (Scheduler::kGrouped ? __all_sync(~0u, tiles.runs_at_least(3)) : tiles.runs_at_least(3));
    u32 packed[kMmaM][kDeferEpilogue ? Epilogue::kPacked : 1];
    bool pending = false;
    int pending_y = 0, pending_x = 0, pending_rows = 0;
    u8* const slab = s.epi + wg * kEpiSlab;
    const int slab_r = warp * 16 + lane / 4,
              slab_c = 2 * (lane % 4);  // thread's first slab row, column
    // The previous tile's deferred D, out: under a tile's first wgmmas, or alone where there are
    // none (an empty K range, the last tile).
    auto store_pending = [&] {
      if constexpr (kDeferEpilogue) {
        Epilogue::store_packed(p, slab, packed, wg, slab_r, slab_c, pending_y, pending_x,
                               pending_end(p, pending_rows));
        pending = false;
      }
    };
    // Tiles in two column halves write each half out under the other half's wgmmas: half 0 during
    // the last K block's half-1 wgmmas, half 1 during the next tile's first half-0 wgmmas (its
    // sums stay live in out's upper half meanwhile, which half 0's K blocks do not touch).
    const bool overlap_halves = kOverlapHalves && tma_store(p) && splits(p) == 1;
    bool half_pending = false;
    int half_row0 = 0, half_col0 = 0, half_y = 0, half_x = 0;
    int half_rows = 0;  // grouped layouts: where the pending half's group rows end (tile_out)
    // Descriptor low words of stage 0's tiles (warpgroup::smem_desc_lo): the K loop adds the
    // stage's and the k-step's offsets. One math warpgroup's tile starts at stage 0's A itself.
    const u32 a_lo0 =
        warpgroup::smem_desc_lo(s.a + (kMathWGs == 1 ? 0 : wg) * kRowsPerWG * BLOCK_K);
    const u32 b_lo0 = warpgroup::smem_desc_lo(s.b);
    // This thread's first row within the tile, the same for every tile, held in a register across
    // the K loop, which ptxas otherwise re-derived from the thread index in every K block in front
    // of the scale loads the wgmma fence waits for (five dependent instructions; 256x128 block
    // 0.4-1 % faster held, H200). With one math warpgroup, and with two in slab passes (256-row
    // tiles); not for two warpgroups' column halves: the held register made block 128x256 spill 8
    // bytes.
    int r_held = wg * kRowsPerWG + warp * 16 + lane / 4;
    if constexpr (kMathWGs == 1 || kSlabPasses) asm volatile("" : "+r"(r_held));
    for (GemmUnit w; Scheduler::kGrouped ? __all_sync(~0u, tiles.next(w)) : tiles.next(w);) {
      const int tn = w.tn, first = w.first, last = w.last;
      const int r0 = r_held;  // row within the tile; + mm*64, + 8
      const int row0 = w.row0 + r0;
      const int col0 = tn * BLOCK_N + 2 * (lane % 4);  // + 8*j, + 1
      const int slab_y = w.row0 + wg * kRowsPerWG,
                slab_x = tn * BLOCK_N;  // D coordinates of the slab
      const int split_j = Promotion::block_split(tn);
      // Grouped layouts: a pending column half that runs past its group's end goes out row by
      // row here, before the K loop, so that the half stored under the loop's wgmmas is always a
      // whole-slab TMA store, as in dense kernels. With the row-by-row path inside the loop, or
      // a branch in front of it that ptxas cannot tell is warp-uniform (the vote says it is: a
      // warpgroup's slab is one), ptxas kept the stage, phase and shared addresses in per-thread
      // registers and re-derived thread indices in every K block: 601 instead of 508
      // instructions in the 128x256 K loop; the indexed layout ran 6 % faster without it (G38).
      // Deferred 16-bit tiles keep their partial stores in the loop: hoisting them serialised
      // those stores and bought no time (128x128).
      if constexpr (kOverlapHalves && Scheduler::kGrouped)
        if (__any_sync(~0u, half_pending && !Epilogue::whole_slab(p, half_y, half_rows))) {
          write_half1<false>(p, pending_half_out(p, half_rows), slab, out, wg, half_row0, half_col0,
                             half_y, half_x);
          half_pending = false;
        }
      // Grouped layouts: the K block after whose half-1 wgmmas half 0 is staged (-1: none), so
      // that the loop tests one register. Tested from the launch parameters there (as dense
      // kernels do, from uniform registers), ptxas reloaded them into per-thread registers
      // (LDC) between the wgmmas of a warpgroup's turn and held the turn longer.
      int stage_half0_kb = overlap_halves ? last - 1 : -1;
      if constexpr (Scheduler::kGrouped) asm volatile("" : "+r"(stage_half0_kb));
      clear_sums(acc, out,
                 half_pending);  // an empty K range (more splits than K blocks) yields zeros
      if constexpr (kDeferEpilogue)
        if (first == last && pending) store_pending();  // no wgmmas to hide it under
      if constexpr (kPipelinePromotion) {
        // K block kb's wgmmas go into one of two sets of temporaries while kb - 1's, in the
        // other, are promoted, so that the tensor cores never wait for a promotion: a
        // warpgroup's K loop is otherwise a chain of full barrier, wgmma latency, wait and
        // promotion per 128 of K. The sets alternate in a fixed order with no test between
        // a wait and the reads it covers, so that ptxas sees which set each wait covers (with a
        // tested wait it serialised the wgmmas, C7514).
        float acc2[kAccSlabs][kChunkAccum];
        struct Issued {
          BlockScales bs;
          const float* sb;
          int stage;
        } cur{}, prev{};
        auto issue = [&](int kb, float(&into)[kAccSlabs][kChunkAccum]) {
          prev = cur;
          barrier::wait(&s.full[stage], phase);
          const float* st = s.scales + stage * kStageScales;
          read_stage_scales(p, w, st, kb, slab_y, r0, cur.bs);
          issue_wgmmas(a_lo0 + stage * (kStageA >> 4), b_lo0 + stage * (kStageB >> 4), into, false,
                       0);
          if constexpr (kDeferEpilogue)
            if (kb == first && pending) store_pending();  // under these wgmmas
          cur.sb = st + kScalesB + (col0 - tn * BLOCK_N);
          cur.stage = stage;
          if (++stage == kStages) {
            stage = 0;
            phase ^= 1;
          }
        };
        // After a wait that covers `from`'s wgmmas: its stage is free (per-column scales of B
        // are read from it by the promotion, so those release after it).
        auto promote = [&](const float(&from)[kAccSlabs][kChunkAccum], const Issued& q) {
          if constexpr (!gemm_scales_per_column(SCALE))
            if (lane == 0) release(s, q.stage);
          Promotion::promote(from, out, q.bs, q.sb, split_j);
          if constexpr (gemm_scales_per_column(SCALE))
            if (lane == 0) release(s, q.stage);
        };
        if (first < last) {
          issue(first, acc);
          int kb = first + 1;
          for (; kb + 1 < last; kb += 2) {
            issue(kb, acc2);
            warpgroup::wait<1>();
            promote(acc, prev);
            issue(kb + 1, acc);
            warpgroup::wait<1>();
            promote(acc2, prev);
          }
          if (kb < last) {  // an even count: the last block into the second set
            issue(kb, acc2);
            warpgroup::wait<1>();
            promote(acc, prev);
            warpgroup::wait<0>();
            promote(acc2, cur);
          } else {
            warpgroup::wait<0>();
            promote(acc, cur);
          }
        }
      } else {
        bool landed = false;  // this K block's stage seen full by the probe in the one before
        for (int kb = first; kb < last; ++kb) {
          if (!landed) barrier::wait(&s.full[stage], phase);
          // Scales are read before the fence: ptxas otherwise interleaves the LDS with the wgmmas,
          // which stalled their issue (G8: 8192^3 block 1045 -> 990 µs with ld.shared before it).
          const float* st = s.scales + stage * kStageScales;
          BlockScales bs;
          read_stage_scales(p, w, st, kb, slab_y, r0, bs);
          const u32 a_lo = a_lo0 + stage * (kStageA >> 4);
#pragma unroll
          for (int c = 0; c < kPasses; ++c) {
            const int chunk = kSlabPasses ? 0 : c;
            const u32 b_lo = b_lo0 + stage * (kStageB >> 4) + chunk * (kChunkN * BLOCK_K >> 4);
            if constexpr (kTakeTurns) named_barrier_sync(kTurnBarrier + wg, kTurnThreads);
            issue_wgmmas(a_lo, b_lo, acc, !kPromote && kb > first, c);
            if constexpr (kTakeTurns) named_barrier_arrive(kTurnBarrier + (wg ^ 1), kTurnThreads);
            if constexpr (kDeferEpilogue)
              if (c == 0 && kb == first && pending) store_pending();  // under these wgmmas
            if constexpr (kOverlapHalves) {
              if (c == 0 && kb == first &&
                  half_pending) {  // the previous tile's half 1, then its store
                write_half1<true>(p, pending_half_out(p, half_rows), slab, out, wg, half_row0,
                                  half_col0, half_y, half_x);
                half_pending = false;
              }
              if (Scheduler::kGrouped ? c == 1 && kb == stage_half0_kb
                                      : c == 1 && kb == last - 1 && overlap_halves) {
                // This tile's half 0 is final (overlap_halves implies TMA stores).
                const TileOut o = staged_out(p, tiles.group());
                if (Scheduler::kGrouped || o.tma) {
                  Epilogue::slab_acquire(wg);
                  Epilogue::template stage_half<2, 0>(p, o, slab, out, row0, col0, slab_y, slab_x);
                }
              }
            }
            warpgroup::wait<0>();
            // This warp is done with the stage once its last wgmmas are: the scales are in
            // registers, except per-column ones of B, which promotion reads from the stage.
            if constexpr (!gemm_scales_per_column(SCALE))
              if (c == kPasses - 1 && lane == 0) release(s, stage);
            if (kProbeNextStage && c == kPasses - 1) {
              const int next = stage + 1 == kStages ? 0 : stage + 1;
              landed = barrier::test(&s.full[next], next == 0 ? phase ^ 1 : phase) && kb + 1 < last;
            }
            if constexpr (kPromote) {
              const float* sb = st + kScalesB + (col0 - tn * BLOCK_N);
              if constexpr (kSlabPasses)
                promote_slab(acc, out, bs, sb, split_j, c);
              else if constexpr (kChunks == 1)
                Promotion::promote(acc, out, bs, sb, split_j);
              else
                Promotion::promote_chunk(acc, out, bs, c);
            }
          }
          if constexpr (gemm_scales_per_column(SCALE))
            if (lane == 0) release(s, stage);
          if (++stage == kStages) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
      const int split = w.split;
      // Computed here rather than before the K loop: its fields would stay live across it.
      const TileOut o = tile_out(p, tiles, slab_y);
      if constexpr (kOverlapHalves)
        if (overlap_halves && o.tma && last > first) {
          half_pending = true;
          if constexpr (Scheduler::kGrouped) half_rows = o.rows_end;
          half_row0 = row0;
          half_col0 = col0;
          half_y = slab_y;
          half_x = slab_x;
          continue;
        }
      if constexpr (kCanSumSplitsInCluster)
        if (split_cluster(p) &&
            !sum_splits(p, s, acc, out, wg * warpgroup::kThreads + t_in_wg, split))
          continue;
      if constexpr (kDeferEpilogue)
        if (defer && o.tma) {
          if constexpr (kPromote)
            Epilogue::pack(p, o, out, row0, col0, packed);
          else
            Epilogue::pack(p, o, acc, row0, col0, packed);
          pending = true;
          pending_y = slab_y;
          pending_x = slab_x;
          if constexpr (Scheduler::kGrouped) pending_rows = o.rows_end;
          continue;
        }
      if constexpr (kPromote)
        Epilogue::run(p, o, slab, out, wg, row0, col0, slab_y, slab_x, split);
      else
        Epilogue::run(p, o, slab, acc, wg, row0, col0, slab_y, slab_x, split);
    }
    if constexpr (kDeferEpilogue)
      if (pending) store_pending();
    if constexpr (kOverlapHalves)
      if (half_pending)
        write_half1(p, pending_half_out(p, half_rows), slab, out, wg, half_row0, half_col0, half_y,
                    half_x);
    if constexpr (kTakeTurns)
      if (kUniformWarpgroup ? threadIdx.x < warpgroup::kThreads : wg == 0)
        named_barrier_sync(kTurnBarrier, kTurnThreads);
    if constexpr (kCanSumSplitsInCluster)
      if (split_cluster(p)) SplitSum::finish();
    if (t_in_wg == 0) tma::store_wait_all();  // shared memory must outlive the last store
  }

  // K block kb's scales from its stage `st` into bs. Grouped tiles' A scales by TMA start at the
  // row rounded down to 4 (GemmGeometry::scales_a); block scales by a TMA map sit at an offset in
  // their box (ScaleLoads::load_block_scales_tma).
  static FP8JIT_DEVICE void read_stage_scales(const GemmParams& p, const GemmUnit& w,
                                              const float* st, int kb, int slab_y, int r0,
                                              BlockScales& bs) {
    const int a_shift = kAlignA && p.scale_tma ? slab_y & 3 : 0;
    const int block_at = kBlockScaleMaps ? ScaleLoads::block_scale_offset(p, w, kb) : 0;
    const bool swapped_block = SCALE == kSwappedBlockScale;
    Promotion::read_scales(st + a_shift + (swapped_block ? block_at : 0),
                           st + kScalesB + (swapped_block ? 0 : block_at), r0, p.sb_hi, bs);
  }

  // Zeroes the wgmma temporaries and the FP32 sums for a new tile; with `keep_half1`, out's upper
  // half still holds the previous tile's pending half 1 (zeroed once written).
  static FP8JIT_DEVICE void clear_sums(float (&acc)[kAccSlabs][kChunkAccum],
                                       float (&out)[kMmaM][kPromote ? kAccum : 1],
                                       bool keep_half1) {
#pragma unroll
    for (int mm = 0; mm < kMmaM; ++mm) {
      if (mm < kAccSlabs)  // slab passes: one slab of temporaries
#pragma unroll
        for (int i = 0; i < kChunkAccum; ++i) acc[mm][i] = 0.0f;
      if constexpr (kPromote)
#pragma unroll
        for (int i = 0; i < kAccum; ++i)
          if (i < kChunkAccum || !keep_half1) out[mm][i] = 0.0f;
    }
  }

  // One pass's wgmmas for a K block (a column chunk's kMmaM m64 slabs, or with slab passes slab
  // `pass` alone, x BLOCK_K / 32 k-steps), fenced and committed; a_lo and b_lo: the descriptor low
  // words of the stage's A rows of this warpgroup and of the pass's B columns; `keep`: add to acc
  // (fast accumulation past a K range's first block), else start from its first k-step's products.
  static FP8JIT_DEVICE void issue_wgmmas(u32 a_lo, u32 b_lo, float (&acc)[kAccSlabs][kChunkAccum],
                                         bool keep, int pass) {
    warpgroup::arrive();
#pragma unroll
    for (int k = 0; k < BLOCK_K / 32; ++k) {
#pragma unroll
      for (int mm = 0; mm < kAccSlabs; ++mm) {
        const int slab = kSlabPasses ? pass : mm;
        // +2 per k-step: 32 bytes further along K, in the descriptor's 16-byte units.
        const u64 desc_a = warpgroup::smem_desc(a_lo + (slab * 64 * BLOCK_K >> 4) + 2 * k);
        Wgmma<kChunkN, FA, FB>::mma(desc_a, warpgroup::smem_desc(b_lo + 2 * k), acc[mm],
                                    (keep || k > 0) ? 1 : 0);
      }
    }
    warpgroup::commit();
  }

  // Slab passes: slab `slab`'s temporaries into its sums, by the one-slab promotion with that
  // slab's row factors.
  using SlabPromotion = Sm90GemmPromotion<BLOCK_M, BLOCK_N, 1, 1, SCALE>;
  static FP8JIT_DEVICE void promote_slab(const float (&acc)[kAccSlabs][kChunkAccum],
                                         float (&out)[kMmaM][kPromote ? kAccum : 1],
                                         const BlockScales& bs, const float* sb, int split_j,
                                         int slab) {
    typename SlabPromotion::BlockScales one;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      one.lo[0][h] = bs.lo[slab][h];
      one.hi[0][h] = bs.hi[slab][h];
    }
    SlabPromotion::promote(acc, reinterpret_cast<float(&)[1][kAccum]>(out[slab]), one, sb, split_j);
  }

  // A pending tile's half 1 into the slab (its half 0 is there), the slab to D, and out's upper
  // half cleared for the tile under way.
  // kWhole: the slab's rows all lie in its group (the K loop's case; see consumer()).
  template <bool kWhole = !Scheduler::kGrouped>
  static FP8JIT_DEVICE void write_half1(const GemmParams& p, const TileOut& o, u8* slab,
                                        float (&out)[kMmaM][kPromote ? kAccum : 1], int wg,
                                        int row0, int col0, int slab_y, int slab_x) {
    if constexpr (kOverlapHalves) {
      Epilogue::template stage_half<2, 1>(p, o, slab, out, row0, col0, slab_y, slab_x);
      Epilogue::template slab_store<kWhole>(p, slab, wg, slab_y, slab_x, o.rows_end);
#pragma unroll
      for (int mm = 0; mm < kMmaM; ++mm)
#pragma unroll
        for (int i = kChunkAccum; i < kAccum; ++i) out[mm][i] = 0.0f;
    }
  }

  // Split-K inside a cluster (GemmParams::split_cluster): a tile's partials are summed through
  // the drained stages, which must hold one FP32 tile (the host reads the same geometry).
  static constexpr bool kCanSumSplitsInCluster = Geometry::get().sums_splits_in_cluster;
  using SplitSum = ClusterSplitSum<kMathWGs * warpgroup::kThreads, kMmaM * kAccum>;

  // This thread's part of a tile's split-K sum (the sums, or fast accumulation's wgmma
  // registers); true where this CTA holds the total and writes the tile.
  static FP8JIT_DEVICE bool sum_splits(const GemmParams& p, const Smem& s,
                                       float (&acc)[kAccSlabs][kChunkAccum],
                                       float (&out)[kMmaM][kPromote ? kAccum : 1], int tid,
                                       int split) {
    float* scratch = reinterpret_cast<float*>(s.a);
    if constexpr (kPromote)
      return SplitSum::run(out, scratch, tid, split, p.splits);
    else
      return SplitSum::run(acc, scratch, tid, split, p.splits);
  }

  using Epilogue = Sm90GemmEpilogue<BLOCK_N, kMmaM, kRowsPerWG, SCALE, OUT, kBias,
                                    Scheduler::kGrouped, Geometry::get().swizzled_slab, kSwapAB>;
  // Where a warpgroup's slab of a unit's tile goes: rows of its group only, with its group's
  // scales of B; through shared memory wherever D's rows allow TMA stores (Epilogue::slab_store
  // stops at the group's end), else by direct stores that stop there.
  static FP8JIT_DEVICE TileOut tile_out(const GemmParams& p, const Scheduler& tiles, int slab_y) {
    return TileOut{Scheduler::slab_end(p, tiles.group(), slab_y, kRowsPerWG),
                   p.scale_b + tiles.group() * p.sb_gs, store_by_tma(p),
                   splits(p) > 1 && !split_cluster(p)};
  }
  // The same for a column half staged under the last wgmmas: its rows' end is not needed yet.
  static FP8JIT_DEVICE TileOut staged_out(const GemmParams& p, int group) {
    return TileOut{p.M, p.scale_b + group * p.sb_gs, store_by_tma(p), false};
  }
  // The end of a deferred tile's rows: dense tiles stop at M, read again rather than kept.
  static FP8JIT_DEVICE int pending_end(const GemmParams& p, int rows_end) {
    return Scheduler::kGrouped ? rows_end : p.M;
  }
  // The same for a column half written after its tile (which went through shared memory): its
  // rows' end, kept from its tile_out (grouped layouts) or M. Block scaling, or a dense GEMM's
  // per-tensor scaling (kOverlapHalves): the epilogue reads no per-group scale of B.
  static FP8JIT_DEVICE TileOut pending_half_out(const GemmParams& p, int rows_end) {
    return TileOut{pending_end(p, rows_end), p.scale_b, true, false};
  }
  // A tile's 16-bit D waits in registers, packed, until the next tile's first wgmmas are issued
  // and is written and stored while they run (fast accumulation packs before those wgmmas
  // overwrite its accumulators).
  // Only where the sums, the in-flight temporaries and the packed tile fit: ptxas spills past
  // 210 of them (128x176 and wider, 256x104).
  // Column halves (kChunks == 2) written out each under the other's wgmmas (see consumer()).
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
              (kPromote ? (kPipelinePromotion ? 2 : 1) * kAccSlabs * kChunkAccum : 0) <=
          kDeferRegisters - (Scheduler::kGrouped ? kGemmGroupedRegisters : 0);

  static FP8JIT_DEVICE void run(const GemmParams& p, u8* raw_smem) {
    u32 dynamic_smem;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dynamic_smem));
    if (dynamic_smem < smem_bytes())
      __trap();  // host and device disagree on the layout: fail loudly
    // Splits summed in a cluster need one work unit per CTA (the stages hold the partial once
    // drained) and a kernel that can hold it: the host guarantees both.
    if (p.split_cluster && (!kCanSumSplitsInCluster || !Scheduler::holds_every_unit(p))) __trap();
    if (kTmaEpilogue && (p.splits != 1 || !p.tma_store)) __trap();  // see tma_store()
    // Swapped operands write D transposed by direct stores: no slab, no workspace partials.
    if (kSwapAB && (p.tma_store || (p.splits > 1 && !p.split_cluster))) __trap();
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
      for (int i = 0; i < kStages; ++i) {
        barrier::init(&s.full[i], full_arrivals(p));
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
      if (threadIdx.x % warpgroup::kThreads < 32) {
        if (producer_lanes(p) > 1) {
          if constexpr (kStagedScales)
            if (threadIdx.x % 32 < producer_lanes(p)) producer<false>(p, s, rank);
        } else if (warpgroup::elect_one()) {
          producer<true>(p, s, rank);
        }
      }
    } else {
      warpgroup::increase_registers<kConsumerRegs>();
      consumer(p, s, wg, rank);
    }
    if constexpr (kCluster > 1) cluster::sync();
  }
};

}  // namespace dev
}  // namespace fp8jit

#include "fp8jit/gemm/reduce.cuh"
