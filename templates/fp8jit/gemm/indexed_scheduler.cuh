// The persistent schedule of grouped GEMMs whose rows name their group: m_indices[r] (on the
// device) is the group of row r of A [M, K] and D [M, N], -1 a padding row (DeepGEMM's
// contiguous layout). Each group's run of rows starts at a multiple of kGemmIndexedAlignment
// rows, its padding after it, so a tile of at most that many rows holds one group's rows and then
// padding: its group is its first row's, and it is skipped when that row is padding. Work units
// walk the tile grid over all M rows like a dense GEMM's; the group table is read where a tile
// starts and, after the K loop, where a slab's group rows end (so padding rows are never written).
// An index out of [-1, G) is padding, as are rows of another group in a tile; both are reported
// through GemmParams::status (kRowIndicesInvalid).
#pragma once

#include "fp8jit/common/defs.cuh"
#include "fp8jit/gemm/params.cuh"
#include "fp8jit/gemm/scheduler.cuh"

namespace fp8jit {
namespace dev {

template <int BLOCK_M, int BLOCK_N, int GROUP_M, int CLUSTER_N>
struct IndexedTileScheduler {
  static_assert(kGemmIndexedAlignment % BLOCK_M == 0, "a tile lies in one aligned chunk of rows");
  // CTA pairs along N only: both tiles of a pair then lie in the same group's rows.
  static constexpr int kCluster = CLUSTER_N;
  static constexpr bool kShareA = CLUSTER_N == 2;
  static constexpr bool kGrouped = true;  // kGemmGroupedRegisters kept back (geometry.cuh)

  const GemmParams& p;
  const int rank;
  int u;      // this CTA's next unit
  int g = 0;  // the group of its last

  FP8JIT_DEVICE IndexedTileScheduler(const GemmParams& params, int cta_rank)
      : p(params), rank(cta_rank), u(static_cast<int>(blockIdx.x) / kCluster) {}

  static FP8JIT_DEVICE int tiles_n(const GemmParams& p) {
    return (p.tiles_n + CLUSTER_N - 1) / CLUSTER_N;
  }
  static FP8JIT_DEVICE int stride() { return static_cast<int>(gridDim.x) / kCluster; }
  static FP8JIT_DEVICE int units(const GemmParams& p) { return p.tiles_m * tiles_n(p); }
  static FP8JIT_DEVICE bool holds_every_unit(const GemmParams&) { return false; }
  static FP8JIT_DEVICE bool schedule_matches(const GemmParams&) { return true; }  // no divisors
  // Padding tiles are skipped: an upper bound, as the deferred epilogue's test allows.
  FP8JIT_DEVICE bool runs_at_least(int n) const { return units(p) >= n * stride(); }
  FP8JIT_DEVICE int group() const { return g; }

  static FP8JIT_DEVICE void report(const GemmParams& p) {
    if (p.status) atomicOr(p.status, kRowIndicesInvalid);
  }

  // One thread's walk (the producer may be a single lane): tiles whose first row is padding, or
  // names no group, are skipped.
  FP8JIT_DEVICE bool next(GemmUnit& w) {
    const int columns = tiles_n(p);
    for (; u < units(p); u += stride()) {
      int tm, tn;
      tile_coords<GROUP_M>(p.tiles_m, columns, u, tm, tn);
      const int row0 = tm * BLOCK_M;
      const int first = __ldg(p.group_rows + row0);
      if (first < 0 || first >= p.groups) {
        if (first != -1 && threadIdx.x % 128 == 0) report(p);
        continue;
      }
      g = first;
      // rows_end: an upper bound (slab_end has the group's end).
      set_group_unit<BLOCK_N>(w, p, tm, tn * CLUSTER_N + (kShareA ? rank : 0), g, row0,
                              min(row0 + BLOCK_M, p.M));
      u += stride();
      return true;
    }
    return false;
  }

  // Where group g's rows end among the slab's rows [y, y + n): its first row whose index is not
  // g. The calling warp's 32 lanes read the indices, 32 rows at a time; an index that names
  // another group after that row (rows nobody computes) or no group is reported.
  static FP8JIT_DEVICE int slab_end(const GemmParams& p, int g, int y, int n) {
    const int lane = static_cast<int>(threadIdx.x % 32);
    const int last = min(y + n, p.M);
    int end = last;
    bool bad = false;
    // Not unrolled: unrolled, with G38's lean K loop beside it, its registers made ptxas spill
    // 2 bytes in the indexed 128x256 block kernel.
#pragma unroll 1
    for (int r0 = y; r0 < last; r0 += 32) {
      const int r = r0 + lane;
      const int v = r < last ? __ldg(p.group_rows + r) : g;
      const unsigned other = __ballot_sync(0xffffffffu, v != g);
      if (other && end == last) end = r0 + __ffs(other) - 1;
      bad |= r < last && (v < -1 || v >= p.groups || (r > end && v >= 0));
    }
    if (__any_sync(0xffffffffu, bad) && lane == 0) report(p);
    return end;
  }
};

}  // namespace dev
}  // namespace fp8jit
