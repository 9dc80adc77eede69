// The persistent schedule of grouped (mixture-of-experts) GEMMs: every group g multiplies its rows
// of A by its own B_g, and the work units are the tiles of all groups in group order, so one launch
// with no host round trip covers every expert. The group table lives on the device and is read
// here, so a captured CUDA graph serves any routing:
//   contiguous: group g owns rows [offsets[g], offsets[g + 1]) of A [M, K] and D [M, N]; any
//               group size, 0 included, no padding (rows before offsets[0] or after offsets[G]
//               belong to no group);
//   masked:     group g owns rows [g * M_max, g * M_max + masked_m[g]) of A [G * M_max, K] and
//               D [G * M_max, N].
// A table out of range is clamped (offsets into [0, M] and ascending, masked_m into [0, M_max])
// and reported through GemmParams::status: nothing outside the tensors is read or written.
// A tile that runs past its group's last row computes those rows (they are other groups' rows, or
// padding) and writes only its own (GemmUnit::rows_end).
// 2-CTA clusters: pairs along N share A's tile (both tiles in one tile-row of a group). Pairs along
// M share B's: both tiles of a pair are tile-rows 2i and 2i + 1 of the same group (each group's
// tile-rows start at its first row), so the pair never mixes experts; a group with an odd number
// of tile-rows gives its last one to pairs of neighbouring column tiles, which share nothing
// (GemmUnit::shared) instead of running a partner tile past the group's end.
#pragma once

#include "fp8jit/common/defs.cuh"
#include "fp8jit/gemm/params.cuh"
#include "fp8jit/gemm/scheduler.cuh"

namespace fp8jit {
namespace dev {

template <int BLOCK_M, int BLOCK_N, int GROUP_M, int CLUSTER_M, int CLUSTER_N, int LAYOUT>
struct GroupedTileScheduler {
  static_assert(LAYOUT == kContiguousLayout || LAYOUT == kMaskedLayout, "a grouped layout");
  static_assert(CLUSTER_M * CLUSTER_N <= 2, "clusters of 1 or 2 CTAs, along M or N");
  static constexpr int kCluster = CLUSTER_M * CLUSTER_N;
  static constexpr bool kShareA = CLUSTER_N == 2, kShareB = CLUSTER_M == 2;
  static constexpr bool kGrouped = true;  // kGemmGroupedRegisters kept back (geometry.cuh)

  const GemmParams& p;
  const int rank;
  // Two registers of state, live across the mainloop (the producer warp runs in 40, and wide
  // tiles' consumers have none to spare): the CTA's next unit, counted from the first unit of
  // group g. A group's rows are read again from the table (an L1 hit) rather than kept.
  int u;
  int g = 0;

  FP8JIT_DEVICE GroupedTileScheduler(const GemmParams& params, int cta_rank)
      : p(params), rank(cta_rank), u(static_cast<int>(blockIdx.x) / kCluster) {}

  // Column units per tile-row: the pairs of tile-columns in a cluster.
  static FP8JIT_DEVICE int tiles_n(const GemmParams& p) {
    return (p.tiles_n + CLUSTER_N - 1) / CLUSTER_N;
  }
  // Units of a group of tiles_m tile-rows: pairs along M take two tile-rows per unit, and an odd
  // last one by two column tiles per unit.
  static FP8JIT_DEVICE int group_units(const GemmParams& p, int tiles_m) {
    if constexpr (kShareB) return tiles_m / 2 * p.tiles_n + tiles_m % 2 * ((p.tiles_n + 1) / 2);
    return tiles_m * tiles_n(p);
  }
  // Read afresh each time (volatile): kept live across the producer's loop instead, the value
  // spilt the producer's 40 registers with pairs along M (block 128x192, 4 bytes).
  static FP8JIT_DEVICE int stride() {
    unsigned ctas;
    asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(ctas));
    return static_cast<int>(ctas / kCluster);
  }
  // Grouped launches never split K, let alone inside clusters.
  static FP8JIT_DEVICE bool holds_every_unit(const GemmParams&) { return false; }
  static FP8JIT_DEVICE bool schedule_matches(const GemmParams&) { return true; }  // no divisors

  // Group g's rows, clamped into range; with kReport, one thread per warpgroup reports a clamp
  // (next() does: it walks every group).
  template <bool kReport = false>
  static FP8JIT_DEVICE void group_rows(const GemmParams& p, int g, int& start, int& rows) {
    int bad = 0;
    if constexpr (LAYOUT == kContiguousLayout) {
      const int lo = __ldg(p.group_rows + g), hi = __ldg(p.group_rows + g + 1);
      start = min(max(lo, 0), p.M);
      const int end = min(max(hi, start), p.M);
      rows = end - start;
      // Each group checks its own pair, so a descending pair anywhere is reported.
      bad = (lo != start || hi != end) ? kGroupOffsetsClamped : 0;
    } else {
      const int m = __ldg(p.group_rows + g);
      start = g * p.group_m_max;
      rows = min(max(m, 0), p.group_m_max);
      bad = rows != m ? kMaskedRowsClamped : 0;
    }
    if constexpr (kReport)
      if (bad && p.status && threadIdx.x % 128 == 0) atomicOr(p.status, bad);
  }

  // Units of the whole launch: the group table read by the 32 lanes of the calling warp, which
  // must all be here, a group per lane at a time.
  FP8JIT_DEVICE int unit_total() const {
    int total = 0;
    for (int i = static_cast<int>(threadIdx.x % 32); i < p.groups; i += 32) {
      int start, rows;
      group_rows(p, i, start, rows);
      total += group_units(p, (rows + BLOCK_M - 1) / BLOCK_M);
    }
#pragma unroll
    for (int lanes = 16; lanes > 0; lanes /= 2) total += __shfl_xor_sync(0xffffffffu, total, lanes);
    return total;
  }
  FP8JIT_DEVICE bool runs_at_least(int n) const {
    return unit_total() >= n * stride();
  }
  FP8JIT_DEVICE int group() const {
    return g;
  }
  static FP8JIT_DEVICE int slab_end(const GemmParams& p, int g, int, int) {
    int start, rows;
    group_rows(p, g, start, rows);
    return start + rows;
  }

  FP8JIT_DEVICE bool next(GemmUnit& w) {
    int start, rows, tiles_m;
    for (;;) {  // units only grow: walk the groups forward to the one holding u
      if (g >= p.groups) return false;
      group_rows<true>(p, g, start, rows);
      tiles_m = (rows + BLOCK_M - 1) / BLOCK_M;
      const int units = group_units(p, tiles_m);
      if (u < units) break;
      u -= units;
      ++g;
    }
    int tm, tn;
    bool shared = true;
    if constexpr (kShareB) {
      const int paired = tiles_m / 2 * p.tiles_n;
      if (u < paired) {
        tile_coords<GROUP_M>(tiles_m / 2, p.tiles_n, u, tm, tn);
        tm = 2 * tm + rank;
      } else {  // the odd last tile-row: column tiles 2v and 2v + 1 (past N: nothing stored)
        tm = tiles_m - 1;
        tn = 2 * (u - paired) + rank;
        shared = false;
      }
    } else {
      tile_coords<GROUP_M>(tiles_m, tiles_n(p), u, tm, tn);
      tn = tn * CLUSTER_N + (kShareA ? rank : 0);
    }
    set_group_unit<BLOCK_N>(w, p, tm, tn, g, start + tm * BLOCK_M, start + rows);
    w.shared = shared;
    u += stride();
    return true;
  }
};

}  // namespace dev
}  // namespace fp8jit
