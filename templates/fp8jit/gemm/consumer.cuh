// The consumer warpgroups of a GEMM kernel (Sm90Fp8Gemm): each tile's K loop of FP8 wgmmas and
// its promotion into FP32 sums, then the epilogue, overlapped with the next tile where it fits.
#pragma once

#include "fp8jit/common/barrier.cuh"
#include "fp8jit/common/tma.cuh"
#include "fp8jit/common/warpgroup.cuh"
#include "fp8jit/gemm/kernel_traits.cuh"

namespace fp8jit {
namespace dev {

// The FP8 wgmma of shape m64nNk32: specialised in the generated source for the variant's N and
// formats (the instruction spells out N/2 accumulator registers).
template <int N, int FA, int FB>
struct Wgmma;

template <class T>
struct Sm90GemmConsumer : T {
  using typename T::BlockScales, typename T::Epilogue, typename T::Promotion,
      typename T::ScaleLoads, typename T::Scheduler, typename T::Smem, typename T::SplitSum,
      T::BLOCK_K, T::BLOCK_M, T::BLOCK_N, T::FA, T::FB, T::SCALE, T::kAccSlabs, T::kAccum,
      T::kAlignA, T::kBlockScaleMaps, T::kCanSumSplitsInCluster, T::kChunkAccum, T::kChunkN,
      T::kChunks, T::kCluster, T::kDeferEpilogue, T::kEpiSlab, T::kMathWGs, T::kMmaM,
      T::kOverlapHalves, T::kPasses, T::kPipelinedKLoop, T::kProbeNextStage, T::kPromote,
      T::kRowsPerWG, T::kScalesB, T::kSlabPasses, T::kSplitAsData, T::kStageA, T::kStageB,
      T::kStageScales, T::kStages, T::kTakeTurns, T::kTurnBarrier, T::kTurnThreads,
      T::kUniformWarpgroup, T::split_cluster, T::splits, T::store_by_tma, T::tma_store;

  // The previous tile's deferred D, packed, and where it goes.
  struct Deferred {
    u32 packed[kMmaM][kDeferEpilogue ? Epilogue::kPacked : 1];
    bool pending = false;
    int y = 0, x = 0, rows = 0;
  };
  // A tile's column half 1, held in out's upper half until the next tile's first wgmmas.
  struct PendingHalf {
    bool pending = false;
    int row0 = 0, col0 = 0, y = 0, x = 0;
    int rows = 0;  // grouped layouts: where the half's group rows end (tile_out)
  };
  // A consumer warpgroup's own: its index, lane, slab of the epilogue, the descriptor low words of
  // stage 0's tiles, and which epilogue overlaps this launch allows.
  struct Self {
    int wg, lane;
    u8* slab;
    int slab_r, slab_c;  // the thread's first slab row, column
    u32 a_lo0, b_lo0;
    bool defer, overlap_halves;
  };
  // Where a unit's tile lies, for this thread.
  struct At {
    int tn, first, last;
    int r0;              // row within the tile; + mm*64, + 8
    int row0, col0;      // D's row and column: + mm*64, + 8; + 8*j, + 1
    int slab_y, slab_x;  // D coordinates of the slab
    int split_j;
    // Where K block kb's block scale sits in its map's box, in the serial K loop: (sb_at + kb *
    // sb_kb) & 3 (ScaleLoads::block_scale_at), the map kind's branch taken once per tile. There
    // ptxas evaluated both kinds' offsets every K block and selected (128x192 block: ten uniform
    // instructions between the full barrier and the first wgmma; H200, 0.3-1.3 % on the long
    // block shapes: 4096x2112x7168 104.6 -> 103.2 µs, 8192^3 797.4 -> 793.7). The pipelined loop
    // keeps the per-K-block select, which ptxas takes out of its (shorter) loop: hoisted there,
    // 64x32 at 128x2112x7168 went 13.3 -> 13.5 µs in two calls.
    int sb_at, sb_kb;
  };

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
    Self me;
    me.wg = wg;
    me.lane = lane;
    // Deferred epilogue: the previous tile's D, packed, and where it goes. Only where each CTA
    // runs three tiles or more: with two (decode-sized M, K = 512) block scaling lost ~1 µs of
    // 17 to it (G21), having little to hide the store under.
    const bool defer =
        kDeferEpilogue && tma_store(p) && (splits(p) == 1 || split_cluster(p)) &&
        (Scheduler::kGrouped ? __all_sync(~0u, tiles.runs_at_least(3)) : tiles.runs_at_least(3));
    me.defer = defer;
    Deferred d;
    me.slab = s.epi + wg * kEpiSlab;
    me.slab_r = warp * 16 + lane / 4;
    me.slab_c = 2 * (lane % 4);
    // Tiles in two column halves write each half out under the other half's wgmmas: half 0 during
    // the last K block's half-1 wgmmas, half 1 during the next tile's first half-0 wgmmas (its
    // sums stay live in out's upper half meanwhile, which half 0's K blocks do not touch).
    me.overlap_halves = kOverlapHalves && tma_store(p) && splits(p) == 1;
    PendingHalf h;
    // Descriptor low words of stage 0's tiles (warpgroup::smem_desc_lo): the K loop adds the
    // stage's and the k-step's offsets. One math warpgroup's tile starts at stage 0's A itself.
    me.a_lo0 = warpgroup::smem_desc_lo(s.a + (kMathWGs == 1 ? 0 : wg) * kRowsPerWG * BLOCK_K);
    me.b_lo0 = warpgroup::smem_desc_lo(s.b);
    // This thread's first row within the tile, the same for every tile, held in a register across
    // the K loop, which ptxas otherwise re-derived from the thread index in every K block in front
    // of the scale loads the wgmma fence waits for (five dependent instructions; 256x128 block
    // 0.4-1 % faster held, H200). With one math warpgroup, and with two in slab passes (256-row
    // tiles); not for two warpgroups' column halves: the held register made block 128x256 spill 8
    // bytes.
    int r_held = wg * kRowsPerWG + warp * 16 + lane / 4;
    if constexpr (kMathWGs == 1 || kSlabPasses) asm volatile("" : "+r"(r_held));
    for (GemmUnit w; Scheduler::kGrouped ? __all_sync(~0u, tiles.next(w)) : tiles.next(w);) {
      At t;
      t.tn = w.tn;
      t.first = w.first;
      t.last = w.last;
      t.r0 = r_held;
      t.row0 = w.row0 + t.r0;
      t.col0 = t.tn * BLOCK_N + 2 * (lane % 4);
      t.slab_y = w.row0 + wg * kRowsPerWG;
      t.slab_x = t.tn * BLOCK_N;
      t.split_j = Promotion::block_split(t.tn);
      if constexpr (!kPipelinedKLoop) ScaleLoads::block_scale_at(p, w, t.sb_at, t.sb_kb);
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
        if (__any_sync(~0u, h.pending && !Epilogue::whole_slab(p, h.y, h.rows))) {
          write_half1<false>(p, pending_half_out(p, h.rows), me.slab, out, wg, h.row0, h.col0, h.y,
                             h.x);
          h.pending = false;
        }
      // Grouped layouts: the K block after whose half-1 wgmmas half 0 is staged (-1: none), so
      // that the loop tests one register. Tested from the launch parameters there (as dense
      // kernels do, from uniform registers), ptxas reloaded them into per-thread registers
      // (LDC) between the wgmmas of a warpgroup's turn and held the turn longer.
      int stage_half0_kb = me.overlap_halves ? t.last - 1 : -1;
      if constexpr (Scheduler::kGrouped) asm volatile("" : "+r"(stage_half0_kb));
      clear_sums(acc, out,
                 h.pending);  // an empty K range (more splits than K blocks) yields zeros
      if constexpr (kDeferEpilogue)
        if (t.first == t.last && d.pending) store_pending(p, me, d);  // no wgmmas to hide it under
      if constexpr (kPipelinedKLoop && kSplitAsData)
        k_loop_pipelined<-1>(p, s, w, t, me, stage, phase, d, acc, out);  // the split as data
      else if constexpr (kPipelinedKLoop && SCALE == kBlockScale)
        Promotion::dispatch_split(t.split_j, [&](auto split) {
          k_loop_pipelined<decltype(split)::value>(p, s, w, t, me, stage, phase, d, acc, out);
        });
      else if constexpr (kPipelinedKLoop)
        k_loop_pipelined<0>(p, s, w, t, me, stage, phase, d, acc, out);
      else
        k_loop(p, s, w, t, me, stage, phase, d, h, acc, out, tiles, stage_half0_kb);
      finish_tile(p, s, w, t, me, d, h, acc, out, tiles, wg * warpgroup::kThreads + t_in_wg);
    }
    if constexpr (kDeferEpilogue)
      if (d.pending) store_pending(p, me, d);
    if constexpr (kOverlapHalves)
      if (h.pending)
        write_half1(p, pending_half_out(p, h.rows), me.slab, out, wg, h.row0, h.col0, h.y, h.x);
    if constexpr (kTakeTurns)
      if (kUniformWarpgroup ? threadIdx.x < warpgroup::kThreads : wg == 0)
        named_barrier_sync(kTurnBarrier, kTurnThreads);
    if constexpr (kCanSumSplitsInCluster)
      if (split_cluster(p)) SplitSum::finish();
    if (t_in_wg == 0) tma::store_wait_all();  // shared memory must outlive the last store
  }

  // The previous tile's deferred D, out: under a tile's first wgmmas, or alone where there are
  // none (an empty K range, the last tile).
  static FP8JIT_DEVICE void store_pending(const GemmParams& p, const Self& me, Deferred& d) {
    if constexpr (kDeferEpilogue) {
      Epilogue::store_packed(p, me.slab, d.packed, me.wg, me.slab_r, me.slab_c, d.y, d.x,
                             pending_end(p, d.rows));
      d.pending = false;
    }
  }

  // K block kb's wgmmas go into one of two sets of temporaries while kb - 1's, in the other, are
  // promoted, so that the tensor cores never wait for a promotion: a warpgroup's K loop is
  // otherwise a chain of full barrier, wgmma latency, wait and promotion per 128 of K. The sets
  // alternate in a fixed order with no test between a wait and the reads it covers, so that ptxas
  // sees which set each wait covers (with a tested wait it serialised the wgmmas, C7514). For the
  // same reason the split of a tile straddling two 128-blocks of B's scales is a template
  // argument (one loop per split the tile can have, chosen per tile by dispatch_split): chosen at
  // run time inside the promotion, it put a branch between a wait and its reads (C7517). Widths
  // of many splits take kSplit -1 instead: one loop, each column group selecting its factor (a
  // select, no branch; GemmGeometry::split_as_data). Other scale modes have no split (kSplit 0).
  // Fast accumulation runs the same loop with nothing to promote: each set sums its own K blocks,
  // so the wgmmas of kb never wait on those of kb - 1.
  template <int kSplit>
  static FP8JIT_DEVICE void k_loop_pipelined(const GemmParams& p, const Smem& s, const GemmUnit& w,
                                             const At& t, const Self& me, int& ring_stage,
                                             u32& ring_phase, Deferred& d,
                                             float (&acc)[kAccSlabs][kChunkAccum],
                                             float (&out)[kMmaM][kPromote ? kAccum : 1]) {
    // The ring's position in locals: read through the references, the next-stage arithmetic of
    // the wait and of the advance was computed twice (NVVM, CUDA 13.0).
    int stage = ring_stage;
    u32 phase = ring_phase;
    float acc2[kAccSlabs][kChunkAccum];
    struct Issued {
      BlockScales bs;
      const float* sb;
      int stage;
    } cur{}, prev{};
    // Fast accumulation sums K in both sets (`keep` past each set's first block) and adds the
    // second into the first after the loop.
    auto issue = [&](int kb, float(&into)[kAccSlabs][kChunkAccum], bool keep) {
      prev = cur;
      barrier::wait(&s.full[stage], phase);
      const float* st = s.scales + stage * kStageScales;
      if constexpr (kPromote) read_stage_scales(p, w, t, st, kb, cur.bs);
      issue_wgmmas(me.a_lo0 + stage * (kStageA >> 4), me.b_lo0 + stage * (kStageB >> 4), into,
                   !kPromote && keep, 0);
      if constexpr (kDeferEpilogue)
        if (kb == t.first && d.pending) store_pending(p, me, d);  // under these wgmmas
      cur.sb = st + kScalesB + (t.col0 - t.tn * BLOCK_N);
      cur.stage = stage;
      if (++stage == kStages) {
        stage = 0;
        phase ^= 1;
      }
    };
    // After a wait that covers `from`'s wgmmas: its stage is free (per-column scales of B are read
    // from it by the promotion, so those release after it).
    auto promote = [&](const float(&from)[kAccSlabs][kChunkAccum], const Issued& q) {
      if constexpr (!gemm_scales_per_column(SCALE))
        if (me.lane == 0) release(s, q.stage);
      if constexpr (!kPromote)
        return;
      else if constexpr (SCALE == kBlockScale && kSplit < 0)
        Promotion::promote_selected(from, out, q.bs, t.split_j);
      else if constexpr (SCALE == kBlockScale)
        Promotion::template promote_split<kSplit>(from, out, q.bs);
      else
        Promotion::promote(from, out, q.bs, q.sb, t.split_j);
      if constexpr (gemm_scales_per_column(SCALE))
        if (me.lane == 0) release(s, q.stage);
    };
    if (t.first < t.last) {
      issue(t.first, acc, false);
      int kb = t.first + 1;
      for (; kb + 1 < t.last; kb += 2) {
        issue(kb, acc2, kb > t.first + 1);
        warpgroup::wait<1>();
        promote(acc, prev);
        issue(kb + 1, acc, true);
        warpgroup::wait<1>();
        promote(acc2, prev);
      }
      if (kb < t.last) {  // an even count: the last block into the second set
        issue(kb, acc2, kb > t.first + 1);
        warpgroup::wait<1>();
        promote(acc, prev);
        warpgroup::wait<0>();
        promote(acc2, cur);
      } else {
        warpgroup::wait<0>();
        promote(acc, cur);
      }
      if constexpr (!kPromote)
        if (t.last - t.first > 1)
#pragma unroll
          for (int mm = 0; mm < kAccSlabs; ++mm)
#pragma unroll
            for (int i = 0; i < kChunkAccum; ++i) acc[mm][i] += acc2[mm][i];
    }
    ring_stage = stage;
    ring_phase = phase;
  }

  // One K block at a time: full barrier, the block's wgmmas (in kPasses batches, each promoted
  // before the next is issued), wait, promotion; the previous tile's deferred D and column halves
  // go out under the first and last blocks' wgmmas.
  static FP8JIT_DEVICE void k_loop(const GemmParams& p, const Smem& s, const GemmUnit& w,
                                   const At& t, const Self& me, int& ring_stage, u32& ring_phase,
                                   Deferred& d, PendingHalf& h,
                                   float (&acc)[kAccSlabs][kChunkAccum],
                                   float (&out)[kMmaM][kPromote ? kAccum : 1],
                                   const Scheduler& tiles, int stage_half0_kb) {
    const int wg = me.wg;
    int stage = ring_stage;  // in locals, as in k_loop_pipelined
    u32 phase = ring_phase;
    bool landed = false;  // this K block's stage seen full by the probe in the one before
    for (int kb = t.first; kb < t.last; ++kb) {
      if (!landed) barrier::wait(&s.full[stage], phase);
      // Scales are read before the fence: ptxas otherwise interleaves the LDS with the wgmmas,
      // which stalled their issue (G8: 8192^3 block 1045 -> 990 µs with ld.shared before it).
      const float* st = s.scales + stage * kStageScales;
      BlockScales bs;
      read_stage_scales(p, w, t, st, kb, bs);
      const u32 a_lo = me.a_lo0 + stage * (kStageA >> 4);
#pragma unroll
      for (int pass = 0; pass < kPasses; ++pass) {
        const int chunk = kSlabPasses ? 0 : pass;
        const u32 b_lo = me.b_lo0 + stage * (kStageB >> 4) + chunk * (kChunkN * BLOCK_K >> 4);
        if constexpr (kTakeTurns) named_barrier_sync(kTurnBarrier + wg, kTurnThreads);
        issue_wgmmas(a_lo, b_lo, acc, !kPromote && kb > t.first, pass);
        if constexpr (kTakeTurns) named_barrier_arrive(kTurnBarrier + (wg ^ 1), kTurnThreads);
        if constexpr (kDeferEpilogue)
          if (pass == 0 && kb == t.first && d.pending) store_pending(p, me, d);  // under these
        if constexpr (kOverlapHalves) {
          if (pass == 0 && kb == t.first &&
              h.pending) {  // the previous tile's half 1, then its store
            write_half1<true>(p, pending_half_out(p, h.rows), me.slab, out, wg, h.row0, h.col0, h.y,
                              h.x);
            h.pending = false;
          }
          if (Scheduler::kGrouped ? pass == 1 && kb == stage_half0_kb
                                  : pass == 1 && kb == t.last - 1 && me.overlap_halves) {
            // This tile's half 0 is final (overlap_halves implies TMA stores).
            const TileOut o = staged_out(p, tiles.group());
            if (Scheduler::kGrouped || o.tma) {
              Epilogue::slab_acquire(wg);
              Epilogue::template stage_half<2, 0>(p, o, me.slab, out, t.row0, t.col0, t.slab_y,
                                                  t.slab_x);
            }
          }
        }
        warpgroup::wait<0>();
        // This warp is done with the stage once its last wgmmas are: the scales are in
        // registers, except per-column ones of B, which promotion reads from the stage.
        if constexpr (!gemm_scales_per_column(SCALE))
          if (pass == kPasses - 1 && me.lane == 0) release(s, stage);
        if (kProbeNextStage && pass == kPasses - 1) {
          const int next = stage + 1 == kStages ? 0 : stage + 1;
          landed = barrier::test(&s.full[next], next == 0 ? phase ^ 1 : phase) && kb + 1 < t.last;
        }
        if constexpr (kPromote) {
          const float* sb = st + kScalesB + (t.col0 - t.tn * BLOCK_N);
          if constexpr (kSlabPasses)
            promote_slab(acc, out, bs, sb, t.split_j, pass);
          else if constexpr (kChunks == 1)
            Promotion::promote(acc, out, bs, sb, t.split_j);
          else
            Promotion::promote_chunk(acc, out, bs, pass);
        }
      }
      if constexpr (gemm_scales_per_column(SCALE))
        if (me.lane == 0) release(s, stage);
      if (++stage == kStages) {
        stage = 0;
        phase ^= 1;
      }
    }
    ring_stage = stage;
    ring_phase = phase;
  }

  // A tile's sums after its K loop: held back as a pending column half or a deferred packed D,
  // summed with its split-K partials in the cluster, or written out now.
  static FP8JIT_DEVICE void finish_tile(const GemmParams& p, const Smem& s, const GemmUnit& w,
                                        const At& t, const Self& me, Deferred& d, PendingHalf& h,
                                        float (&acc)[kAccSlabs][kChunkAccum],
                                        float (&out)[kMmaM][kPromote ? kAccum : 1],
                                        const Scheduler& tiles, int tid) {
    const int split = w.split;
    // Computed here rather than before the K loop: its fields would stay live across it.
    const TileOut o = tile_out(p, tiles, t.slab_y);
    if constexpr (kOverlapHalves)
      if (me.overlap_halves && o.tma && t.last > t.first) {
        h.pending = true;
        if constexpr (Scheduler::kGrouped) h.rows = o.rows_end;
        h.row0 = t.row0;
        h.col0 = t.col0;
        h.y = t.slab_y;
        h.x = t.slab_x;
        return;
      }
    if constexpr (kCanSumSplitsInCluster)
      if (split_cluster(p) && !sum_splits(p, s, acc, out, tid, split)) return;
    if constexpr (kDeferEpilogue)
      if (me.defer && o.tma) {
        if constexpr (kPromote)
          Epilogue::pack(p, o, out, t.row0, t.col0, d.packed);
        else
          Epilogue::pack(p, o, acc, t.row0, t.col0, d.packed);
        d.pending = true;
        d.y = t.slab_y;
        d.x = t.slab_x;
        if constexpr (Scheduler::kGrouped) d.rows = o.rows_end;
        return;
      }
    if constexpr (kPromote)
      Epilogue::run(p, o, me.slab, out, me.wg, t.row0, t.col0, t.slab_y, t.slab_x, split);
    else
      Epilogue::run(p, o, me.slab, acc, me.wg, t.row0, t.col0, t.slab_y, t.slab_x, split);
  }

  // K block kb's scales from its stage `st` into bs. Grouped tiles' A scales by TMA start at the
  // row rounded down to 4 (GemmGeometry::scales_a); block scales by a TMA map sit at an offset in
  // their box (ScaleLoads::load_block_scales_tma).
  static FP8JIT_DEVICE void read_stage_scales(const GemmParams& p, const GemmUnit& w, const At& t,
                                              const float* st, int kb, BlockScales& bs) {
    const int a_shift = kAlignA && p.scale_tma ? t.slab_y & 3 : 0;
    int block_at = 0;  // see At::sb_at
    if constexpr (kBlockScaleMaps)
      block_at =
          kPipelinedKLoop ? ScaleLoads::block_scale_offset(p, w, kb) : (t.sb_at + kb * t.sb_kb) & 3;
    const bool swapped_block = SCALE == kSwappedBlockScale;
    Promotion::read_scales(st + a_shift + (swapped_block ? block_at : 0),
                           st + kScalesB + (swapped_block ? 0 : block_at), t.r0, p.sb_hi, bs);
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

  // A pending tile's half 1 into the slab (its half 0 is there), the slab to D, and out's upper
  // half cleared for the tile under way.
  // kWhole: the slab's rows all lie in its group (the K loop's case; see consumer).
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
};

}  // namespace dev
}  // namespace fp8jit
