// The table of routes (runtime/ops/routes.hpp) the runtime keeps per seen call of quantize,
// dequantize and gemm: keys, hits and misses, replacement by tuning, and readers racing writers.
// No GPU needed.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "runtime/jit/kernel_cache.hpp"
#include "runtime/ops/gemm.hpp"
#include "runtime/ops/routes.hpp"

namespace fp8jit::test {
namespace {

CUcontext fake_ctx(std::uintptr_t v) { return reinterpret_cast<CUcontext>(v); }

GemmArgs args() {
  GemmArgs a;
  a.m = 4096;
  a.n = 7168;
  a.k = 2048;
  a.scale_mode = ScaleMode::block;
  return a;
}

// The key Runtime::gemm routes normalized arguments by.
RouteKey gemm_route_key(CUcontext ctx, const GemmArgs& a) {
  return route_key(ctx, ops::problem_of(a), {a.m, a.n, a.k});
}

TEST(Routes, EveryProblemHasItsOwnBits) {
  std::set<std::uint64_t> seen;
  int problems = 0;
  for (Fp8Format fa : {Fp8Format::e4m3, Fp8Format::e5m2})
    for (Fp8Format fb : {Fp8Format::e4m3, Fp8Format::e5m2})
      for (DType out : {DType::bf16, DType::fp16, DType::fp32})
        for (ScaleMode s : {ScaleMode::tensor, ScaleMode::rowwise, ScaleMode::block, ScaleMode::group})
          for (bool bias : {false, true})
            for (bool fast : {false, true}) {
              seen.insert(problem_bits(GemmProblem{fa, fb, out, s, bias, fast}));
              ++problems;
            }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(problems));
}

TEST(Routes, EveryElementwiseProblemHasItsOwnBits) {
  std::set<std::uint64_t> quantize, dequantize;
  int problems = 0;
  for (DType d : {DType::bf16, DType::fp16, DType::fp32})
    for (Fp8Format f : {Fp8Format::e4m3, Fp8Format::e5m2})
      for (Granularity g : {Granularity::tensor, Granularity::row, Granularity::group128, Granularity::block128}) {
        for (bool t : {false, true}) quantize.insert(problem_bits(QuantizeProblem{d, f, g, t}));
        dequantize.insert(problem_bits(DequantizeProblem{f, d, g}));
        ++problems;
      }
  EXPECT_EQ(quantize.size(), static_cast<std::size_t>(2 * problems));
  EXPECT_EQ(dequantize.size(), static_cast<std::size_t>(problems));
}

// One table for every operation: a quantize, a dequantize and a gemm route never take each
// other's place, even where their problems pack to the same bits; elementwise routes differ by
// vector width, and not by shape.
TEST(Routes, OperationsAndVectorWidthsHaveTheirOwnRoutes) {
  const QuantizeProblem q{DType::bf16, Fp8Format::e4m3, Granularity::tensor, false};
  const DequantizeProblem d{Fp8Format::e4m3, DType::bf16, Granularity::tensor};
  ASSERT_EQ(problem_bits(q), problem_bits(d));
  RouteTable table;
  std::vector<LoadedKernel> kernels(4);
  const RouteKey keys[] = {route_key(fake_ctx(0x10), q, 16), route_key(fake_ctx(0x10), q, 8),
                           route_key(fake_ctx(0x10), d, 16), gemm_route_key(fake_ctx(0x10), args())};
  for (int i = 0; i < 4; ++i) table.put(keys[i], {&kernels[i], 0, 1});
  EXPECT_EQ(table.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    Route r;
    ASSERT_TRUE(table.find(keys[i], r)) << i;
    EXPECT_EQ(r.kernel, &kernels[i]) << i;
  }
  EXPECT_EQ(keys[0].m, 0);
  EXPECT_EQ(keys[0].k, 0);
}

TEST(Routes, KeyHoldsWhatIsBakedInAndTheShapeOnly) {
  const GemmArgs base = args();
  const RouteKey k = gemm_route_key(fake_ctx(0x10), base);
  // Run-time arguments of any kernel: same route.
  GemmArgs same = base;
  same.a = reinterpret_cast<const void*>(0x1000);
  same.lda = 4096;
  same.ldd = 8192;
  same.scale_a_layout = ScaleLayout::row_major;
  same.scale_a_size = 12345;
  EXPECT_EQ(gemm_route_key(fake_ctx(0x10), same), k);
  // What picks another kernel (or another split) must give another key.
  std::vector<GemmArgs> other(8, base);
  other[0].a_format = Fp8Format::e5m2;
  other[1].b_format = Fp8Format::e5m2;
  other[2].d_dtype = DType::fp32;
  other[3].scale_mode = ScaleMode::tensor;
  other[4].bias = reinterpret_cast<const void*>(0x2000);
  other[5].m = 4095;
  other[6].n = 7040;
  other[7].k = 2064;
  for (const GemmArgs& o : other) EXPECT_FALSE(gemm_route_key(fake_ctx(0x10), o) == k);
  EXPECT_FALSE(gemm_route_key(fake_ctx(0x20), base) == k);
  // Fast accumulation is its own kernel: a precise call must not take a fast one's route.
  GemmArgs precise = base, fast = base;
  precise.scale_mode = fast.scale_mode = ScaleMode::tensor;
  fast.fast_accum = true;
  EXPECT_FALSE(gemm_route_key(fake_ctx(0x10), precise) == gemm_route_key(fake_ctx(0x10), fast));
}

TEST(Routes, MissThenHitOnExactlyTheSameKey) {
  RouteTable table;
  std::vector<LoadedKernel> kernels(2);
  const RouteKey k = gemm_route_key(fake_ctx(0x10), args());
  Route r{&kernels[1], 99, 7};
  EXPECT_FALSE(table.find(k, r));
  EXPECT_EQ(r.kernel, &kernels[1]);  // a miss leaves the output alone
  table.put(k, {&kernels[0], 132, 3});
  ASSERT_TRUE(table.find(k, r));
  EXPECT_EQ(r.kernel, &kernels[0]);
  EXPECT_EQ(r.sm_count, 132);
  EXPECT_EQ(r.splits, 3);
  std::vector<RouteKey> near(8, k);
  near[0].ctx = fake_ctx(0x11);
  near[1].problem ^= 1;
  near[2].m += 1;
  near[3].n += 1;
  near[4].k += 16;
  near[5].problem ^= std::uint64_t{1} << 16;
  near[6].op = RouteOp::quantize;
  near[7].vec = 8;
  for (const RouteKey& n : near) EXPECT_FALSE(table.find(n, r));
  EXPECT_EQ(table.size(), 1u);
}

TEST(Routes, TuningReplacesARoute) {
  RouteTable table;
  std::vector<LoadedKernel> kernels(2);
  const RouteKey k = gemm_route_key(fake_ctx(0x10), args());
  table.put(k, {&kernels[0], 132, 1});
  table.put(k, {&kernels[1], 132, 2});
  Route r;
  ASSERT_TRUE(table.find(k, r));
  EXPECT_EQ(r.kernel, &kernels[1]);
  EXPECT_EQ(r.splits, 2);
  EXPECT_EQ(table.size(), 1u);
}

TEST(Routes, ReadersAndWritersAtOnce) {
  // Readers probe shapes already stored while writers add new ones: every hit is the route
  // stored for that key, and every key written is found afterwards.
  RouteTable table;
  constexpr int kShapes = 512, kWriters = 2, kReaders = 4;
  std::vector<LoadedKernel> kernels(kShapes);
  auto key_of = [](int i) {
    GemmArgs a = args();
    a.m = 1 + i;
    return gemm_route_key(fake_ctx(0x10), a);
  };
  for (int i = 0; i < kShapes / 2; ++i) table.put(key_of(i), {&kernels[i], 132, 1 + i % 4});
  std::atomic<int> wrong{0}, missed{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w)
    threads.emplace_back([&, w] {
      for (int i = kShapes / 2 + w; i < kShapes; i += kWriters)
        table.put(key_of(i), {&kernels[i], 132, 1 + i % 4});
    });
  for (int t = 0; t < kReaders; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 200; ++round)
        for (int i = t; i < kShapes; i += 7) {
          Route r;
          if (!table.find(key_of(i), r)) {
            if (i < kShapes / 2) ++missed;  // stored before the threads started
            continue;
          }
          if (r.kernel != &kernels[i] || r.splits != 1 + i % 4) ++wrong;
        }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(missed, 0);
  EXPECT_EQ(table.size(), static_cast<std::size_t>(kShapes));
  for (int i = 0; i < kShapes; ++i) {
    Route r;
    ASSERT_TRUE(table.find(key_of(i), r)) << i;
    EXPECT_EQ(r.kernel, &kernels[i]);
  }
}

}  // namespace
}  // namespace fp8jit::test
