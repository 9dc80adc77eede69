// The dense GEMM's persistent schedule as arithmetic that g++ and NVRTC both build: the host fills
// GemmParams::schedule from the launch's shape and config, the kernel's DenseTileScheduler maps
// work units to tiles with it, and host tests walk the same functions. Integer division by a
// launch value costs ~25 dependent instructions (I2F, MUFU.RCP, F2I, IMAD.HI, corrections); a
// tile's first unit took three of them between the kernel's barrier and the producer's first TMA
// load (600-900 of the 1500-2400 cycles from the kernel's start to that load, H200 timeline
// probe), which kernels of a few µs pay in full. The divisors are fixed per launch, so the host
// turns each into a multiply and a shift. NVRTC-safe: no system header.
#pragma once

#include "fp8jit/common/defs.cuh"

namespace fp8jit {
namespace dev {

// Division of a non-negative int n below 2^31 by d >= 1 without a branch (Granlund and
// Montgomery's round-down method): with l = ceil(log2 d) and mul = floor(2^32 (2^l - d) / d) + 1,
// t = n * mul >> 32 and the quotient is (t + n) >> l; t <= n keeps the sum below 2^32. d = 1 and
// powers of two take mul = 1 (t = 0).
struct FastDivisor {
  int d;
  u32 mul;
  int shift;
};

constexpr FastDivisor make_fast_divisor(int d) {
  if (d <= 0) return FastDivisor{d, 0u, 0};  // no launch has one: its dimensions are positive
  int l = 0;
  while ((1ll << l) < d) ++l;
  const u64 mul = ((1ull << 32) * ((1ull << l) - static_cast<u64>(d))) / static_cast<u64>(d) + 1;
  return FastDivisor{d, static_cast<u32>(mul), l};
}

constexpr int fast_div(const FastDivisor& f, int n) {
  const u32 t = static_cast<u32>((static_cast<u64>(static_cast<u32>(n)) * f.mul) >> 32);
  return static_cast<int>((t + static_cast<u32>(n)) >> f.shift);
}

// What the dense schedule divides by: a unit's K range (splits), its raster group of GROUP_M
// cluster tile-rows walked column by column (group: GROUP_M x the cluster tile-columns), and the
// last group's tile-rows where fewer than GROUP_M are left (the others divide by the compile-time
// GROUP_M). Cluster tiles: CLUSTER_M x CLUSTER_N CTAs take neighbouring tiles of one unit.
struct DenseSchedule {
  int tiles_m, tiles_n;  // cluster tiles
  int group_m;
  FastDivisor splits, group, last_rows;
};

constexpr DenseSchedule make_dense_schedule(int tiles_m, int tiles_n, int splits, int group_m,
                                            int cluster_m, int cluster_n) {
  const int cm = (tiles_m + cluster_m - 1) / cluster_m, cn = (tiles_n + cluster_n - 1) / cluster_n;
  const int last_rows = cm > 0 ? (cm - 1) % group_m + 1 : group_m;
  return DenseSchedule{cm,
                       cn,
                       group_m,
                       make_fast_divisor(splits),
                       make_fast_divisor(group_m * cn),
                       make_fast_divisor(last_rows)};
}

// Cluster tile (tm, tn) and K range `split` of unit u (u below the launch's units): the grouped
// raster GROUP_M cluster tile-rows at a time, column by column, so that concurrently running CTAs
// share rows of A and columns of B in L2; the K ranges of one tile on neighbouring units.
// GROUP_M: the kernel's compile-time group (the host passes its config's), so full groups divide
// by a constant.
struct DenseUnit {
  int tm, tn, split;
};

template <int GROUP_M>
constexpr DenseUnit dense_unit(const DenseSchedule& s, int u) {
  const int t = fast_div(s.splits, u);
  const int split = u - t * s.splits.d;
  const int group = fast_div(s.group, t);
  const int first_m = group * GROUP_M;
  const int in_group = t - group * s.group.d;
  if (s.tiles_m - first_m >= GROUP_M)
    return DenseUnit{first_m + in_group % GROUP_M, in_group / GROUP_M, split};
  const int across = fast_div(s.last_rows, in_group);
  return DenseUnit{first_m + in_group - across * s.last_rows.d, across, split};
}

}  // namespace dev
}  // namespace fp8jit
