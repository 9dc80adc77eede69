// Which output tiles, and which K range of each, a persistent CTA works on: the tile scheduler,
// kept apart from the mainloop that works on them. The kernel's producer and consumers each walk
// the same sequence of work units with their own scheduler object (they never exchange units, so
// a scheduler must be deterministic per CTA). Dense GEMMs walk the tile grid in grouped order;
// grouped (mixture-of-experts) layouts are further schedulers (grouped_scheduler.cuh) with this
// interface:
//   Scheduler(p, rank)               this CTA's walk (rank: its place in a 2-CTA cluster)
//   bool next(GemmUnit& w)           the next unit, false when the CTA is done
//   bool runs_at_least(int n)        every CTA runs about n units or more (the deferred epilogue's
//   test) static bool holds_every_unit(p)  the grid has a CTA per unit (split-K summed in clusters)
//   int group()                      the last unit's group, again: the epilogue asks after the K
//                                    loop instead of keeping it live
//   static bool schedule_matches(p)  the host's GemmParams::schedule is the one this kernel walks
//   static int slab_end(p, g, y, n)  where group g's rows end among rows [y, y + n) of a tile of
//                                    group g (the epilogue's slab; M for dense GEMMs), computed
//                                    after the K loop by the slab's warps (all 32 lanes)
#pragma once

#include "fp8jit/common/defs.cuh"
#include "fp8jit/gemm/params.cuh"

namespace fp8jit {
namespace dev {

// One work unit: an output tile of this CTA and the K blocks [first, last) it sums, split `split`
// of the tile's K splits. Grouped layouts add where the tile lies: its group (expert), the first
// row of A and D it covers, the end of its group's rows (rows from there on belong to another
// group or to no one: computed, never written) and the first row of B's [G * N, K] it reads.
// In a 2-CTA cluster, `shared` says whether the pair shares its operand by multicast on this
// unit; where it does not (a grouped pair along M on the last tile-row of a group with an odd
// number of them: two tiles of that row), each CTA loads its own whole tiles.
struct GemmUnit {
  int tm, tn;  // tile coordinates within the group's grid (dense: the grid)
  int first, last;
  int split;
  int group;
  int row0, rows_end;
  int b_row0;
  bool shared;
};

// A grouped layout's unit: all K blocks of column tile tn (already placed in its pair) and the
// tile-row at row0 of group g, whose rows end at rows_end; B_g's rows start at g * N.
template <int BLOCK_N>
FP8JIT_DEVICE void set_group_unit(GemmUnit& w, const GemmParams& p, int tm, int tn, int g, int row0,
                                  int rows_end) {
  w.tm = tm;
  w.tn = tn;
  w.first = 0;
  w.last = p.k_blocks;
  w.split = 0;
  w.group = g;
  w.row0 = row0;
  w.rows_end = rows_end;
  w.b_row0 = g * p.N + tn * BLOCK_N;
  w.shared = true;
}

// Grouped raster over a tiles_m x tiles_n grid: GROUP_M tile-rows are walked column by column,
// so concurrently running CTAs share A rows and B columns in L2.
template <int GROUP_M>
FP8JIT_DEVICE void tile_coords(int tiles_m, int tiles_n, int t, int& tm, int& tn) {
  const int per_group = GROUP_M * tiles_n;
  const int group = t / per_group;
  const int first_m = group * GROUP_M;
  const int rows = min(tiles_m - first_m, GROUP_M);
  const int in_group = t - group * per_group;
  tm = first_m + in_group % rows;
  tn = in_group / rows;
}

// The dense GEMM's persistent schedule. Work unit u of a launch: cluster tile u / splits (a
// cluster's CTAs take neighbouring tiles), K range u % splits (the splits of one tile run on
// neighbouring CTAs, so their A and B blocks meet in L2). CTA b takes units b / cluster,
// b / cluster + gridDim.x / cluster, ...; every CTA of a cluster walks the same units.
// A partner's tile past the edge of D still runs (zero-filled loads, nothing stored): its CTA
// delivers half of the shared operand to the other.
template <int BLOCK_M, int BLOCK_N, int GROUP_M, int CLUSTER_M, int CLUSTER_N>
struct DenseTileScheduler {
  static constexpr int kCluster = CLUSTER_M * CLUSTER_N;
  static constexpr bool kShareA = CLUSTER_N == 2, kShareB = CLUSTER_M == 2;
  // Whether the geometry keeps registers for a grouped layout's scheduler (GemmTile::grouped).
  static constexpr bool kGrouped = false;

  const GemmParams& p;
  const int rank;
  const int units;  // of the launch
  int u;            // this CTA's next

  FP8JIT_DEVICE DenseTileScheduler(const GemmParams& params, int cta_rank)
      : p(params),
        rank(cta_rank),
        units(unit_count(params)),
        u(static_cast<int>(blockIdx.x) / kCluster) {}

  static FP8JIT_DEVICE int cluster_tiles_m(const GemmParams& p) {
    return (p.tiles_m + CLUSTER_M - 1) / CLUSTER_M;
  }
  static FP8JIT_DEVICE int cluster_tiles_n(const GemmParams& p) {
    return (p.tiles_n + CLUSTER_N - 1) / CLUSTER_N;
  }
  // Work units of the launch; the host sizes the grid from the same count (runtime/ops/gemm.cpp).
  static FP8JIT_DEVICE int unit_count(const GemmParams& p) {
    return cluster_tiles_m(p) * cluster_tiles_n(p) * p.splits;
  }
  static FP8JIT_DEVICE int stride() { return static_cast<int>(gridDim.x) / kCluster; }

  FP8JIT_DEVICE bool runs_at_least(int n) const { return units >= n * stride(); }
  FP8JIT_DEVICE int group() const { return 0; }
  static FP8JIT_DEVICE int slab_end(const GemmParams& p, int, int, int) { return p.M; }
  // Split-K summed inside clusters needs one unit per CTA (the stages hold the partial once
  // drained): false where the grid is too small for that.
  static FP8JIT_DEVICE bool holds_every_unit(const GemmParams& p) {
    return static_cast<int>(gridDim.x) >= unit_count(p);
  }

  // Whether the host's schedule (GemmParams::schedule) is this kernel's: its raster group and
  // K ranges.
  static FP8JIT_DEVICE bool schedule_matches(const GemmParams& p) {
    return p.schedule.group_m == GROUP_M && p.schedule.splits.d == p.splits;
  }

  // kFast: by the host's divisors (GemmParams::schedule), for the producer, whose first unit
  // stands between the kernel's barrier and its first load. The consumers keep the plain
  // divisions, off their critical path (they wait for that load), which ptxas holds in fewer
  // registers across the K loop: with the divisors there, per tensor 64x256 spilt 2 bytes.
  template <bool kFast = false>
  FP8JIT_DEVICE bool next(GemmUnit& w) {
    if (u >= units) return false;
    if constexpr (kFast) {
      const DenseUnit c = dense_unit<GROUP_M>(p.schedule, u);
      w.split = c.split;
      w.tm = c.tm;
      w.tn = c.tn;
    } else {
      w.split = u % p.splits;
      tile_coords<GROUP_M>(cluster_tiles_m(p), cluster_tiles_n(p), u / p.splits, w.tm, w.tn);
    }
    w.first = w.split * p.kb_per_split;
    w.last = min(w.first + p.kb_per_split, p.k_blocks);
    w.tm = w.tm * CLUSTER_M + (kShareB ? rank : 0);
    w.tn = w.tn * CLUSTER_N + (kShareA ? rank : 0);
    w.group = 0;
    w.row0 = w.tm * BLOCK_M;
    w.rows_end = p.M;
    w.b_row0 = w.tn * BLOCK_N;
    w.shared = true;
    u += stride();
    return true;
  }
};

}  // namespace dev
}  // namespace fp8jit
