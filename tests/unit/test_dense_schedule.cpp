// The dense GEMM's schedule arithmetic (templates/fp8jit/gemm/dense_schedule.cuh), which the
// kernel runs as it is: the multiply-shift division against `/` over spread divisors and
// numerators up to 2^31 - 1, and the unit-to-tile map against the plain grouped raster, every
// tile and K range once, for shapes with full and partial raster groups, split-K and clusters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "fp8jit/gemm/dense_schedule.cuh"

namespace {

using fp8jit::dev::DenseSchedule;
using fp8jit::dev::DenseUnit;
using fp8jit::dev::fast_div;
using fp8jit::dev::make_dense_schedule;
using fp8jit::dev::make_fast_divisor;

TEST(FastDivisor, EqualsIntegerDivision) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> any(0, 0x7fffffff);
  std::vector<int> divisors;
  for (int d = 1; d <= 4096; ++d) divisors.push_back(d);
  for (int e = 12; e <= 30; ++e)
    for (int off : {-1, 0, 1}) divisors.push_back((1 << e) + off);
  for (int i = 0; i < 200; ++i) divisors.push_back(1 + any(rng) % 0x7ffffffe);
  for (const int d : divisors) {
    const auto f = make_fast_divisor(d);
    for (int n = 0; n < 600; ++n) ASSERT_EQ(fast_div(f, n), n / d) << n << " / " << d;
    for (const int n : {d - 1, d, d + 1, 2 * d - 1, 0x7fffffff, 0x7ffffffe, 0x40000000})
      if (n >= 0) ASSERT_EQ(fast_div(f, n), n / d) << n << " / " << d;
    for (int i = 0; i < 200; ++i) {
      const int n = any(rng);
      ASSERT_EQ(fast_div(f, n), n / d) << n << " / " << d;
    }
  }
}

// The raster as the kernel walked it before the schedule's divisors: unit u's K range u % splits
// of cluster tile u / splits, GROUP_M tile-rows a group, column by column.
DenseUnit plain_unit(int tiles_m, int tiles_n, int splits, int group_m, int u) {
  const int t = u / splits, per_group = group_m * tiles_n, group = t / per_group;
  const int first_m = group * group_m, rows = std::min(tiles_m - first_m, group_m);
  const int in_group = t - group * per_group;
  return DenseUnit{first_m + in_group % rows, in_group / rows, u % splits};
}

template <int GROUP_M>
void expect_schedule(int tiles_m, int tiles_n, int splits, int cluster_m, int cluster_n) {
  const DenseSchedule s =
      make_dense_schedule(tiles_m, tiles_n, splits, GROUP_M, cluster_m, cluster_n);
  const int cm = (tiles_m + cluster_m - 1) / cluster_m, cn = (tiles_n + cluster_n - 1) / cluster_n;
  ASSERT_EQ(s.tiles_m, cm);
  ASSERT_EQ(s.tiles_n, cn);
  std::set<std::tuple<int, int, int>> seen;
  for (int u = 0; u < cm * cn * splits; ++u) {
    const DenseUnit got = fp8jit::dev::dense_unit<GROUP_M>(s, u);
    const DenseUnit want = plain_unit(cm, cn, splits, GROUP_M, u);
    ASSERT_EQ(std::tie(got.tm, got.tn, got.split), std::tie(want.tm, want.tn, want.split))
        << "unit " << u << " of " << tiles_m << "x" << tiles_n << " tiles, " << splits
        << " splits, group " << GROUP_M << ", cluster " << cluster_m << "x" << cluster_n;
    ASSERT_TRUE(got.tm >= 0 && got.tm < cm && got.tn >= 0 && got.tn < cn);
    ASSERT_TRUE(seen.emplace(got.tm, got.tn, got.split).second)
        << "unit " << u << " repeats a tile";
  }
}

TEST(DenseSchedule, MapsEveryUnitAsThePlainRaster) {
  const int shapes[][3] = {{1, 1, 1},   {1, 33, 1},  {7, 19, 1},  {8, 16, 1},
                           {9, 16, 1},  {17, 5, 3},  {32, 22, 1}, {33, 128, 2},
                           {5, 132, 4}, {64, 64, 1}, {100, 3, 7}, {2, 2, 16}};
  for (const auto& sh : shapes)
    for (const auto [cm, cn] : {std::pair{1, 1}, std::pair{2, 1}, std::pair{1, 2}}) {
      expect_schedule<1>(sh[0], sh[1], sh[2], cm, cn);
      expect_schedule<8>(sh[0], sh[1], sh[2], cm, cn);
      expect_schedule<16>(sh[0], sh[1], sh[2], cm, cn);
    }
}

}  // namespace
