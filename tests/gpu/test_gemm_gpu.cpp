// gemm on the GPU against the float64 reference of the dequantized operands: every scale mode x
// output dtype x operand formats, shapes with ragged tails, poisoned outputs (NaN never passes).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <random>

#include "fp8jit/error.hpp"
#include "fp8jit/fp8.hpp"
#include "fp8jit/reference.hpp"
#include "fp8jit/runtime.hpp"
#include "generator/families/gemm_geometry.hpp"
#include "runtime/sass/ffma_reuse.hpp"
#include "runtime/sass/gemm_post_passes.hpp"
#include "runtime/ops/gemm.hpp"
#include "runtime/jit/kernel_cache.hpp"
#include "common/parallel.hpp"
#include "common/settings.hpp"
#include "tests/common/child_process.hpp"
#include "tests/common/gpu_env.hpp"
#include "tests/gpu/gemm_operands.hpp"

namespace fp8jit::test {
namespace {

struct Operands {
  std::unique_ptr<DeviceMem> a, b, sa, sb, bias;
  GemmArgs args;
};

Operands make_operands(const GemmProblem& p, std::int64_t m, std::int64_t n, std::int64_t k, unsigned seed) {
  Operands o;
  GemmArgs& g = o.args;
  g.m = m; g.n = n; g.k = k;
  g.a_format = p.a_format;
  g.b_format = p.b_format;
  g.d_dtype = p.out;
  g.scale_mode = p.scale;
  g.fast_accum = p.fast_accum;
  g.scale_a_layout = (seed % 2) ? ScaleLayout::col_major_tma : ScaleLayout::row_major;
  g.scale_b_layout = (seed % 3) ? ScaleLayout::row_major : ScaleLayout::col_major_tma;
  g.scale_a_size = scale_count(gemm_scale_granularity_a(p.scale), g.scale_a_layout, m, k);
  g.scale_b_size = scale_count(gemm_scale_granularity_b(p.scale), g.scale_b_layout, n, k);
  o.a = std::make_unique<DeviceMem>(m * k);
  o.b = std::make_unique<DeviceMem>(n * k);
  o.sa = std::make_unique<DeviceMem>(4 * g.scale_a_size);
  o.sb = std::make_unique<DeviceMem>(4 * g.scale_b_size);
  quantize_into(m, k, p.a_format, gemm_scale_granularity_a(p.scale), g.scale_a_layout, o.a->get(), o.sa->f32(), seed);
  quantize_into(n, k, p.b_format, gemm_scale_granularity_b(p.scale), g.scale_b_layout, o.b->get(), o.sb->f32(), seed + 1000);
  g.a = o.a->get();
  g.b = o.b->get();
  g.scale_a = o.sa->f32();
  g.scale_b = o.sb->f32();
  if (p.bias) {
    const auto h = random_tensor(1, n, n, p.out, seed + 7, false);
    o.bias = std::make_unique<DeviceMem>(h.size());
    o.bias->upload(h.data(), h.size());
    g.bias = o.bias->get();
  }
  return o;
}

// Runs D = gemm(args) with D poisoned (NaN) and padded rows (ldd > n); returns the relative
// Frobenius error against the float64 reference, and checks that the padding was not written.
// `offset` elements: D starts that far into its buffer (not 16-byte aligned: no TMA stores).
double run_and_compare(GemmArgs g, std::int64_t pad, const KernelSpec* spec = nullptr,
                       std::int64_t offset = 0) {
  g.ldd = g.n + pad;
  const std::size_t esize = dtype_size(g.d_dtype);
  DeviceMem d((g.m * g.ldd + offset) * esize), ref(g.m * g.n * 8);
  d.poison(0xFF);
  g.d = static_cast<unsigned char*>(d.get()) + offset * esize;
  if (spec) default_runtime().gemm(g, *spec, nullptr);
  else default_runtime().gemm(g, nullptr);
  auto dh = d.download();
  for (std::int64_t i = 0; i < offset * static_cast<std::int64_t>(esize); ++i)
    if (dh[i] != 0xFF) {
      ADD_FAILURE() << "byte " << i << " before D written";
      return INFINITY;
    }
  dh.erase(dh.begin(), dh.begin() + offset * esize);
  reference::gemm_on_device(g, ref.as<double>(), nullptr);
  const auto rb = ref.download();
  for (std::int64_t r = 0; r < g.m; ++r)
    for (std::int64_t c = g.n * esize; c < g.ldd * static_cast<std::int64_t>(esize); ++c)
      if (dh[r * g.ldd * esize + c] != 0xFF) {
        ADD_FAILURE() << "padding byte written at row " << r;
        return INFINITY;
      }
  return reference::relative_error(dh.data(), g.ldd, g.d_dtype, reinterpret_cast<const double*>(rb.data()), g.m, g.n);
}

// Issue bounds: 1e-3 for fp32 output, 4e-3 for bf16/fp16; fast accumulation is held to 4e-3.
double tolerance(const GemmProblem& p) { return p.out == DType::fp32 && !p.fast_accum ? 1e-3 : 4e-3; }

struct Shape { std::int64_t m, n, k; };

// Compiles every kernel the runtime will pick for these cases in parallel, so the tests don't
// wait for NVRTC one kernel at a time.
void precompile(const std::vector<KernelSpec>& specs) {
  parallel_for(specs.size(), 16, [&](std::size_t i) {
    try { default_runtime().compile(specs[i]); } catch (...) {}  // the test's own call reports it
  });
}
void precompile(const std::vector<std::pair<GemmProblem, Shape>>& cases) {
  std::vector<KernelSpec> specs;
  for (const auto& [p, s] : cases) specs.push_back(default_gemm_spec(p, s.m, s.n, s.k));
  precompile(specs);
}

// A problem run with a given config on a shape (tests of config features).
struct ConfigCase { GemmProblem p; GemmConfig c; Shape s; };

// Each case with its config against the reference (pad: see run_and_compare), all compiled first.
void run_config_cases(const std::vector<ConfigCase>& cases, unsigned seed, int pad_every) {
  std::vector<KernelSpec> specs;
  for (const ConfigCase& c : cases) specs.push_back(make_gemm_spec(c.p, c.c));
  precompile(specs);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const ConfigCase& c = cases[i];
    SCOPED_TRACE(testing::Message() << spec_name(specs[i]) << " m=" << c.s.m << " n=" << c.s.n << " k=" << c.s.k);
    Operands o = make_operands(c.p, c.s.m, c.s.n, c.s.k, seed++);
    EXPECT_LE(run_and_compare(o.args, seed % pad_every == 0 ? 3 : 0, &specs[i]), tolerance(c.p));
  }
}

TEST(GemmGpu, EveryModeOutputAndFormatOnRaggedShapes) {
  FP8JIT_REQUIRE_GPU();
  const std::vector<Shape> shapes = {{65, 24, 144}, {130, 200, 272}};
  std::vector<std::pair<GemmProblem, Shape>> cases;
  for (ScaleMode mode : {ScaleMode::tensor, ScaleMode::rowwise, ScaleMode::block, ScaleMode::group})
    for (DType out : {DType::bf16, DType::fp16, DType::fp32})
      for (auto [fa, fb] : {std::pair{Fp8Format::e4m3, Fp8Format::e4m3}, std::pair{Fp8Format::e4m3, Fp8Format::e5m2},
                            std::pair{Fp8Format::e5m2, Fp8Format::e4m3}})
        for (const Shape& s : shapes) cases.push_back({GemmProblem{fa, fb, out, mode, s.m == 130}, s});
  precompile(cases);
  unsigned seed = 1;
  for (const auto& [p, s] : cases) {
    SCOPED_TRACE(testing::Message() << to_string(p.scale) << " " << to_string(p.out) << " " << to_string(p.a_format)
                                    << "x" << to_string(p.b_format) << (p.bias ? " bias" : "") << " m=" << s.m
                                    << " n=" << s.n << " k=" << s.k);
    Operands o = make_operands(p, s.m, s.n, s.k, seed++);
    EXPECT_LE(run_and_compare(o.args, seed % 3 == 0 ? 3 : (seed % 2 ? 8 : 0)), tolerance(p));  // pad 3: direct stores
  }
}

TEST(GemmGpu, IssueShapes) {
  FP8JIT_REQUIRE_GPU();
  // Every M, N and K of the issue's list appears at least once, against each scale mode.
  const std::vector<Shape> shapes = {{1, 16, 16},     {7, 24, 128},      {64, 2112, 144},  {65, 7168, 128},
                                     {128, 16, 7168}, {1000, 2112, 144}, {4096, 7168, 7168}, {1, 7168, 7168},
                                     {4096, 24, 16},  {65, 2112, 7168}};
  std::vector<std::pair<GemmProblem, Shape>> cases;
  for (const Shape& s : shapes)
    for (ScaleMode mode : {ScaleMode::block, ScaleMode::tensor, ScaleMode::rowwise, ScaleMode::group})
      cases.push_back({GemmProblem{Fp8Format::e4m3, Fp8Format::e4m3, mode == ScaleMode::tensor ? DType::fp32 : DType::bf16, mode, false}, s});
  // Fast accumulation on the largest K.
  for (const Shape& s : shapes)
    if (s.k == 7168) cases.push_back({GemmProblem{Fp8Format::e4m3, Fp8Format::e4m3, DType::fp32, ScaleMode::tensor, false, true}, s});
  precompile(cases);
  unsigned seed = 100;
  for (const auto& [p, s] : cases) {
    SCOPED_TRACE(testing::Message() << to_string(p.scale) << " m=" << s.m << " n=" << s.n << " k=" << s.k);
    Operands o = make_operands(p, s.m, s.n, s.k, seed++);
    EXPECT_LE(run_and_compare(o.args, 0), tolerance(p));
  }
}

// 2-CTA clusters (TMA multicast of the shared operand's halves) along M and N, on shapes whose
// partner tiles fall past the edge of D (odd tile counts), with split-K (64 x 2112 x 7168) and a
// large shape; every mode that allows clusters, bf16 and fp32 out, bias on some.
TEST(GemmGpu, ClustersOnRaggedShapes) {
  FP8JIT_REQUIRE_GPU();
  std::vector<ConfigCase> cases;
  const std::vector<Shape> shapes = {{130, 200, 272}, {1000, 2112, 144}, {64, 2112, 7168}, {4096, 7168, 2048}, {7, 24, 128}};
  const std::vector<GemmConfig> configs = {{128, 160, 3, 8, 1, 2}, {128, 128, 4, 8, 2, 1}, {64, 64, 6, 8, 1, 2},
                                           {64, 96, 6, 1, 2, 1},   {256, 96, 3, 16, 1, 2}};
  for (ScaleMode mode : {ScaleMode::block, ScaleMode::tensor, ScaleMode::rowwise})
    for (DType out : {DType::bf16, DType::fp32})
      for (const GemmConfig& c : configs) {
        if (mode == ScaleMode::block && c.block_m == 256) continue;  // not offered (registers)
        if (out == DType::fp32 && c.block_m == 256) continue;        // shared memory
        for (const Shape& sh : shapes)
          cases.push_back({GemmProblem{Fp8Format::e4m3, out == DType::fp32 ? Fp8Format::e5m2 : Fp8Format::e4m3, out,
                                       mode, sh.m == 130},
                           c, sh});
      }
  cases.push_back({GemmProblem{Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::tensor, false, true},
                   {128, 224, 3, 8, 1, 2}, {1000, 2112, 7168}});
  run_config_cases(cases, 300, 5);
}

// Split-K summed inside clusters (rank 0 adds the other ranks' partials over distributed shared
// memory): 2, 3, 4 and 8 ranges, ragged M, N and K, every mode, bias, fast accumulation. Each
// case first checks that the cluster sum is what the launch will use.
TEST(GemmGpu, SplitKSummedInClusters) {
  FP8JIT_REQUIRE_GPU();
  if (Settings::get().split_sum != SplitSum::cluster) GTEST_SKIP() << "FP8JIT_SPLIT_SUM=workspace";
  const Fp8Format e4 = Fp8Format::e4m3, e5 = Fp8Format::e5m2;
  const std::vector<ConfigCase> cases = {
      {{e4, e4, DType::fp32, ScaleMode::tensor}, {64, 64, 6, 8}, {64, 2112, 7184}},         // 33 tiles: 4
      {{e4, e4, DType::bf16, ScaleMode::block}, {64, 64, 6, 8}, {37, 2813, 7168}},          // 44 tiles: 3
      {{e4, e5, DType::fp16, ScaleMode::rowwise, true}, {64, 64, 6, 8}, {50, 1019, 16384}},  // 16 tiles: up to 8
      {{e4, e4, DType::bf16, ScaleMode::group}, {128, 64, 6, 8}, {100, 3840, 7168}},        // 60 tiles: 2
      {{e4, e4, DType::fp32, ScaleMode::block, true}, {128, 128, 4, 8}, {130, 1000, 7168}},  // 16 tiles
      {{e4, e4, DType::bf16, ScaleMode::tensor, false, true}, {128, 96, 5, 8}, {128, 4000, 7168}},
  };
  KernelCache kernels({"/tmp/fp8jit-split-test-cache", false,
                       gemm_post_passes(RuntimeOptions::from_settings().ffma_reuse), {ops::gemm_load_hook()}});
  int sms = 0;
  ASSERT_EQ(cudaSuccess, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  unsigned seed = 500;
  for (const ConfigCase& c : cases) {
    const KernelSpec spec = make_gemm_spec(c.p, c.c);
    Operands o = make_operands(c.p, c.s.m, c.s.n, c.s.k, seed++);
    GemmArgs probe = o.args;
    probe.d = o.a->get();  // normalize wants an output; run_and_compare supplies the real one
    const GemmArgs a = ops::normalize(probe);
    const LoadedKernel& k = kernels.get(spec);
    const int splits = ops::split_count(k, a, sms);
    SCOPED_TRACE(testing::Message() << spec_name(spec) << " m=" << c.s.m << " n=" << c.s.n << " k=" << c.s.k
                                    << " splits=" << splits);
    EXPECT_GE(splits, 2);
    EXPECT_TRUE(ops::splits_in_cluster(k, a, splits));
    EXPECT_EQ(ops::workspace_bytes(k, a, splits), 0u);
    EXPECT_LE(run_and_compare(o.args, seed % 2 ? 0 : 8, &spec), tolerance(c.p));
  }
}

// Kernels built for TMA epilogues (config epilogue = tma) hold no split-K and no direct stores:
// the runtime routes them where K is one range and runs the config's any build for a call whose
// D cannot take TMA stores (a row pitch that is not 16 bytes, a D that is not 16-byte aligned),
// or whose K splits (an explicit tma spec at a decode shape). Every such call must still be right.
TEST(GemmGpu, TmaEpilogueKernelsServeOnlyWhatTheyCan) {
  FP8JIT_REQUIRE_GPU();
  const Fp8Format e4 = Fp8Format::e4m3;
  struct Case {
    GemmProblem p;
    Shape s;
  };
  const std::vector<Case> cases = {
      {{e4, e4, DType::bf16, ScaleMode::block}, {300, 1024, 768}},
      {{e4, e4, DType::fp16, ScaleMode::tensor, true, true}, {257, 640, 512}},
      {{e4, e4, DType::fp32, ScaleMode::rowwise}, {64, 520, 512}},
      {{e4, e4, DType::bf16, ScaleMode::block}, {1000, 9216, 512}},
  };
  unsigned seed = 900;
  for (const Case& c : cases) {
    Operands o = make_operands(c.p, c.s.m, c.s.n, c.s.k, seed++);
    GemmArgs probe = o.args;
    probe.d = o.a->get();
    const KernelSpec chosen = default_runtime().select(probe);
    SCOPED_TRACE(testing::Message()
                 << spec_name(chosen) << " m=" << c.s.m << " n=" << c.s.n << " k=" << c.s.k);
    EXPECT_EQ(gemm_config_of(chosen).epilogue, GemmEpilogue::tma);
    EXPECT_LE(run_and_compare(o.args, 0), tolerance(c.p));  // the tma kernel
    EXPECT_LE(run_and_compare(o.args, 3), tolerance(c.p));  // rows not 16-byte multiples
    EXPECT_LE(run_and_compare(o.args, 0, nullptr, 1), tolerance(c.p));  // D not 16-byte aligned
    EXPECT_LE(run_and_compare(o.args, 0, &chosen, 1), tolerance(c.p));  // the same, spec given
  }
  // A tma spec where the heuristic splits K (64x2112x7168, 64x64: 33 tiles, 4 ranges): runs split.
  const GemmProblem p{e4, e4, DType::bf16, ScaleMode::block};
  GemmConfig c{64, 64, 6, 8};
  ASSERT_GE(gemm_split_k(64, 2112, 7168, c, 132), 2);
  c.epilogue = GemmEpilogue::tma;
  const KernelSpec spec = make_gemm_spec(p, c);
  Operands o = make_operands(p, 64, 2112, 7168, seed++);
  EXPECT_LE(run_and_compare(o.args, 0, &spec), tolerance(p));
  EXPECT_LE(run_and_compare(o.args, 8, &spec), tolerance(p));
}

// Swapped operands (GemmConfig::swap_ab, the heuristic's choice up to 16 rows of A): D^T = B A^T
// written transposed by direct stores. The defaults for every scale mode (block scaling's scales
// of A by TMA and, with row-major scales, by cp.async), bias, e5m2, fp16 and fp32 out, ragged N
// and K, K split in clusters, 128-row tiles; D padded, odd-pitched and unaligned; then the
// tuner's wider swapped tiles at up to 32 rows.
TEST(GemmGpu, SwappedOperandsAtDecodeM) {
  FP8JIT_REQUIRE_GPU();
  const Fp8Format e4 = Fp8Format::e4m3, e5 = Fp8Format::e5m2;
  struct Case {
    GemmProblem p;
    Shape s;
  };
  const std::vector<Case> cases = {
      {{e4, e4, DType::bf16, ScaleMode::block}, {1, 6144, 4096}},
      {{e4, e4, DType::bf16, ScaleMode::block}, {16, 4096, 4096}},  // 64 tiles: K in 2 ranges
      {{e5, e4, DType::fp32, ScaleMode::block, true}, {5, 1000, 1040}},
      {{e4, e4, DType::fp16, ScaleMode::block}, {9, 28672, 512}},  // 128-row tiles
      {{e4, e4, DType::bf16, ScaleMode::tensor}, {1, 5120, 4096}},
      {{e4, e5, DType::fp16, ScaleMode::tensor, true, true}, {13, 200, 7168}},
      {{e4, e4, DType::fp32, ScaleMode::rowwise, true}, {16, 10240, 8192}},
      {{e4, e4, DType::bf16, ScaleMode::rowwise, false, true}, {3, 2112, 7168}},
  };
  std::vector<std::pair<GemmProblem, Shape>> compile;
  for (const Case& c : cases) compile.push_back({c.p, c.s});
  precompile(compile);
  unsigned seed = 1300;
  for (const Case& c : cases) {
    for (int variant = 0; variant < 2; ++variant) {  // both scale layouts of A (seed parity)
      Operands o = make_operands(c.p, c.s.m, c.s.n, c.s.k, seed++);
      GemmArgs probe = o.args;
      probe.d = o.a->get();
      const KernelSpec chosen = default_runtime().select(probe);
      SCOPED_TRACE(testing::Message() << spec_name(chosen) << " m=" << c.s.m << " n=" << c.s.n
                                      << " k=" << c.s.k << " seed=" << seed);
      EXPECT_EQ(gemm_config_of(chosen).swap_ab, 1);
      EXPECT_LE(run_and_compare(o.args, variant ? 3 : 0), tolerance(c.p));
      EXPECT_LE(run_and_compare(o.args, 1, nullptr, variant ? 1 : 0), tolerance(c.p));
    }
  }
  const std::vector<ConfigCase> tuned = {
      {{e4, e4, DType::bf16, ScaleMode::block},
       {64, 32, 12, 8, 1, 1, GemmEpilogue::any, 1},
       {32, 4096, 7168}},
      {{e4, e4, DType::bf16, ScaleMode::block, true},
       {128, 24, 10, 8, 1, 1, GemmEpilogue::any, 1},
       {20, 3000, 2000}},
      {{e4, e4, DType::bf16, ScaleMode::tensor},
       {128, 8, 12, 8, 1, 1, GemmEpilogue::any, 1},
       {1, 8192, 8192}},
      {{e4, e4, DType::fp32, ScaleMode::rowwise},
       {64, 16, 20, 8, 1, 1, GemmEpilogue::any, 1},
       {16, 4096, 4096}},
  };
  run_config_cases(tuned, 1400, 2);
}

// Precise tiles wider than 208 columns run their wgmmas on two column halves, each promoted
// before the next (block scaling: one 128-block of B per half): every mode that chunks, bf16,
// fp16 and fp32 out, bias up to 224 columns, ragged M, N and K, split-K, 64- and 128-row tiles.
TEST(GemmGpu, WideTilesInColumnHalves) {
  FP8JIT_REQUIRE_GPU();
  const Fp8Format e4 = Fp8Format::e4m3, e5 = Fp8Format::e5m2;
  const std::vector<ConfigCase> cases = {
      {{e4, e4, DType::bf16, ScaleMode::block}, {128, 256, 3, 8}, {1000, 2112, 7168}},
      {{e4, e4, DType::bf16, ScaleMode::block}, {128, 256, 3, 16}, {4096, 7168, 384}},
      {{e5, e4, DType::fp32, ScaleMode::block}, {128, 256, 2, 8}, {130, 600, 1040}},
      {{e4, e4, DType::fp16, ScaleMode::block}, {64, 256, 4, 8}, {65, 2000, 7168}},  // split-K
      {{e4, e4, DType::bf16, ScaleMode::tensor}, {128, 256, 3, 8}, {1000, 2112, 7168}},
      {{e4, e5, DType::fp32, ScaleMode::tensor, true}, {128, 224, 2, 8}, {257, 700, 272}},
      {{e4, e4, DType::bf16, ScaleMode::rowwise, true}, {128, 224, 3, 1}, {300, 1000, 2048}},
      {{e4, e4, DType::fp16, ScaleMode::rowwise}, {128, 240, 3, 4}, {129, 4000, 144}},
      // One K block per tile, ~4 tiles per CTA: a half written out under the next tile's first
      // wgmmas, then the slab reacquired in the same K block.
      {{e4, e4, DType::bf16, ScaleMode::tensor}, {128, 256, 3, 16}, {4096, 4000, 128}},
  };
  for (const ConfigCase& c : cases) ASSERT_EQ(gemm_geometry(c.p, c.c).chunks, 2) << c.c.block_n;
  run_config_cases(cases, 700, 3);
}

// 256-row tiles whose two m64 slabs per warpgroup promote in turn (GemmGeometry::slab_passes):
// block scaling at 112, 120 and 128 columns (112 and 120 straddle two 128-blocks of B), per
// tensor and rowwise, bias, fp16 and fp32 out, ragged M, N and K, split-K.
TEST(GemmGpu, TallTilesPromoteTheirSlabsInTurn) {
  FP8JIT_REQUIRE_GPU();
  const Fp8Format e4 = Fp8Format::e4m3, e5 = Fp8Format::e5m2;
  const std::vector<ConfigCase> cases = {
      {{e4, e4, DType::bf16, ScaleMode::block}, {256, 128, 3, 8}, {4096, 4096, 7168}},
      {{e4, e4, DType::bf16, ScaleMode::block}, {256, 128, 3, 16}, {1000, 2112, 1536}},
      {{e4, e4, DType::fp32, ScaleMode::block, true}, {256, 112, 2, 8}, {300, 700, 1040}},
      {{e5, e4, DType::bf16, ScaleMode::block}, {256, 120, 3, 8}, {513, 1000, 7168}},
      {{e4, e4, DType::fp16, ScaleMode::block}, {256, 128, 3, 8}, {130, 2000, 7168}},  // split-K
      {{e4, e4, DType::bf16, ScaleMode::tensor}, {256, 128, 3, 8}, {1000, 4000, 2048}},
      {{e4, e5, DType::fp16, ScaleMode::rowwise, true}, {256, 120, 3, 4}, {257, 600, 272}},
  };
  for (const ConfigCase& c : cases) ASSERT_TRUE(gemm_geometry(c.p, c.c).slab_passes) << c.c.block_n;
  run_config_cases(cases, 900, 3);
}

// Each case's default kernel is a 256-row tile, and it matches the reference.
void expect_tall_defaults(const std::vector<std::pair<GemmProblem, Shape>>& cases, unsigned seed) {
  precompile(cases);
  for (const auto& [p, s] : cases) {
    Operands o = make_operands(p, s.m, s.n, s.k, seed++);
    GemmArgs probe = o.args;
    probe.d = o.a->get();  // select checks D's pointer; run_and_compare allocates the real D
    const KernelSpec chosen = default_runtime().select(probe);
    SCOPED_TRACE(testing::Message()
                 << spec_name(chosen) << " m=" << s.m << " n=" << s.n << " k=" << s.k);
    EXPECT_EQ(gemm_config_of(chosen).block_m, 256);
    EXPECT_LE(run_and_compare(o.args, 0), tolerance(p));
  }
}

// The heuristic's 256x128 under 16 K blocks (fast accumulation at any width, precise from 16384
// columns): the defaults at 1024-2048 rows, 2-4 K blocks, ragged N and M, every mode that takes it.
TEST(GemmGpu, TallTilesAtShortKByDefault) {
  FP8JIT_REQUIRE_GPU();
  const Fp8Format e4 = Fp8Format::e4m3;
  const std::vector<std::pair<GemmProblem, Shape>> cases = {
      {{e4, e4, DType::bf16, ScaleMode::block}, {1024, 16384, 512}},
      {{e4, e4, DType::bf16, ScaleMode::tensor}, {1024, 16400, 384}},
      {{e4, e4, DType::bf16, ScaleMode::tensor, false, true}, {1024, 8192, 256}},
      {{e4, e4, DType::fp32, ScaleMode::tensor, false, true}, {2000, 8200, 512}},
  };
  expect_tall_defaults(cases, 950);
}

// The heuristic's 256x128 for per-row scaling (no bias), over 16 K blocks from 2048 rows: the
// defaults of a Linear's backward GEMMs in rowwise FP8 training, ragged N.
TEST(GemmGpu, TallTilesPerRowByDefault) {
  FP8JIT_REQUIRE_GPU();
  const Fp8Format e4 = Fp8Format::e4m3, e5 = Fp8Format::e5m2;
  const std::vector<std::pair<GemmProblem, Shape>> cases = {
      {{e4, e4, DType::bf16, ScaleMode::rowwise}, {2048, 4096, 2048}},
      {{e5, e4, DType::bf16, ScaleMode::rowwise}, {4096, 2000, 4096}},
  };
  expect_tall_defaults(cases, 960);
}

// The heuristic's 256x128 with a bias (not per row), over 16 K blocks from 2048 rows: the forward
// GEMMs of FP8 training's Linear, ragged N and M.
TEST(GemmGpu, TallTilesWithBiasByDefault) {
  FP8JIT_REQUIRE_GPU();
  const Fp8Format e4 = Fp8Format::e4m3;
  const std::vector<std::pair<GemmProblem, Shape>> cases = {
      {{e4, e4, DType::bf16, ScaleMode::tensor, true}, {2048, 2000, 2048}},
      {{e4, e4, DType::fp32, ScaleMode::tensor, true}, {4096, 2000, 2048}},
      {{e4, e4, DType::fp16, ScaleMode::tensor, true}, {4090, 2048, 2064}},
      {{e4, e4, DType::bf16, ScaleMode::block, true}, {2048, 4000, 4096}},
  };
  expect_tall_defaults(cases, 962);
}

// 256-row tiles staging D in 128-byte swizzled panels (GemmGeometry::swizzled_slab): two m64 slabs
// per warpgroup in one slab of panels, with and without slab passes, one panel (256x64) and two,
// FP32 out, per tensor with a bias (fast; precise and per row in their TMA-only builds), rows and
// columns cut by M and N.
TEST(GemmGpu, TallTilesStageWholePanels) {
  FP8JIT_REQUIRE_GPU();
  const Fp8Format e4 = Fp8Format::e4m3, e5 = Fp8Format::e5m2;
  const std::vector<ConfigCase> cases = {
      {{e4, e4, DType::bf16, ScaleMode::block}, {256, 128, 3, 8}, {1000, 4000, 2048}},
      {{e4, e4, DType::bf16, ScaleMode::block}, {256, 64, 4, 8}, {777, 1000, 1536}},
      {{e5, e4, DType::fp32, ScaleMode::block}, {256, 64, 3, 8}, {700, 900, 1040}},
      {{e4, e4, DType::bf16, ScaleMode::tensor, true, true}, {256, 128, 3, 8}, {600, 1000, 1040}},
      {{e4, e5, DType::fp16, ScaleMode::tensor}, {256, 128, 3, 16}, {257, 640, 512}},
      // TMA-only builds (their any builds keep row-major slabs: padded D runs them).
      {{e4, e4, DType::bf16, ScaleMode::tensor, true}, {256, 128, 3, 8, 1, 1, GemmEpilogue::tma}, {1000, 1000, 2048}},
      {{e4, e4, DType::bf16, ScaleMode::rowwise}, {256, 128, 3, 8, 1, 1, GemmEpilogue::tma}, {600, 1000, 1040}},
      {{e5, e4, DType::fp32, ScaleMode::rowwise}, {256, 96, 2, 8, 1, 1, GemmEpilogue::tma}, {300, 500, 1536}},
      {{e4, e4, DType::fp16, ScaleMode::tensor, true}, {256, 64, 3, 8, 1, 1, GemmEpilogue::tma}, {513, 376, 1024}},
  };
  for (const ConfigCase& c : cases)
    ASSERT_TRUE(gemm_geometry(c.p, c.c).swizzled_slab) << c.c.block_n;
  run_config_cases(cases, 950, 2);
}

// Slabs in 64- and 32-byte swizzled panels (GemmGeometry::panel_bytes): rows of 192 and 448 bytes
// (64-byte panels; fast accumulation's deferred epilogue) and of 352, 96 and 160 bytes (32-byte
// panels), FP32 out with a bias, per row, 256-row tiles, a 2-CTA cluster, one tile per CTA, rows
// and columns cut by M and N.
TEST(GemmGpu, NarrowPanelsOnRaggedShapes) {
  FP8JIT_REQUIRE_GPU();
  const Fp8Format e4 = Fp8Format::e4m3, e5 = Fp8Format::e5m2;
  const std::vector<ConfigCase> cases = {
      {{e4, e4, DType::bf16, ScaleMode::block}, {128, 96, 6, 8}, {700, 2000, 768}},
      {{e4, e4, DType::bf16, ScaleMode::tensor}, {128, 176, 4, 8}, {777, 1100, 1040}},
      {{e4, e4, DType::bf16, ScaleMode::tensor, false, true}, {128, 224, 3, 8}, {500, 1100, 512}},
      {{e4, e4, DType::bf16, ScaleMode::block}, {64, 48, 8, 8}, {65, 1000, 1152}},
      {{e5, e4, DType::fp32, ScaleMode::tensor, true}, {64, 40, 8, 8}, {100, 900, 640}},
      {{e4, e5, DType::fp16, ScaleMode::rowwise, true}, {64, 96, 6, 8}, {130, 1000, 896}},
      {{e4, e4, DType::bf16, ScaleMode::block}, {256, 96, 3, 8}, {600, 1000, 1536}},
      {{e4, e4, DType::bf16, ScaleMode::block}, {128, 96, 6, 8, 1, 2}, {300, 1000, 2048}},
  };
  for (const ConfigCase& c : cases) {
    const int panel = gemm_geometry(c.p, c.c).panel_bytes;
    ASSERT_TRUE(panel == 64 || panel == 32) << c.c.block_n << ": " << panel;
  }
  run_config_cases(cases, 990, 2);
}

// Block-scaled 64-row tiles whose width does not divide 128 straddle two 128-blocks of B and take
// the pipelined K loop: once per split for widths of at most three splits (24, 48, 96;
// Sm90GemmPromotion::dispatch_split), once with the split as data for the rest up to 112
// (promote_selected). N long enough that the tiles' columns meet every split a width has, ragged
// M, N and K, odd and even K-block counts (the loop's two tails), split-K, a 2-CTA cluster, fp16
// and fp32 out, bias.
TEST(GemmGpu, StraddlingTilesPipelineEverySplit) {
  FP8JIT_REQUIRE_GPU();
  const Fp8Format e4 = Fp8Format::e4m3, e5 = Fp8Format::e5m2;
  const std::vector<ConfigCase> cases = {
      {{e4, e4, DType::bf16, ScaleMode::block}, {64, 24, 16, 8}, {37, 1000, 1152}},
      {{e4, e4, DType::bf16, ScaleMode::block}, {64, 48, 15, 1}, {64, 1500, 2048}},
      {{e4, e4, DType::bf16, ScaleMode::block}, {64, 48, 8, 8}, {100, 1800, 7168}},  // split-K
      {{e5, e4, DType::fp16, ScaleMode::block, true}, {64, 48, 8, 8}, {65, 1160, 1040}},
      {{e4, e5, DType::fp32, ScaleMode::block}, {64, 48, 6, 8}, {50, 1500, 896}},
      {{e4, e4, DType::bf16, ScaleMode::block}, {64, 96, 6, 1, 1, 2}, {130, 1250, 1536}},
      {{e4, e4, DType::bf16, ScaleMode::block, true}, {64, 96, 6, 8}, {64, 1400, 640}},
      {{e4, e4, DType::fp16, ScaleMode::block}, {64, 96, 5, 8}, {90, 2000, 5120}},
      {{e4, e4, DType::bf16, ScaleMode::block}, {64, 40, 16, 8}, {37, 1000, 1152}},
      {{e4, e4, DType::bf16, ScaleMode::block}, {64, 56, 8, 8}, {128, 1800, 7168}},  // split-K
      {{e5, e4, DType::fp32, ScaleMode::block, true}, {64, 56, 8, 1}, {65, 1000, 1040}},
      {{e4, e4, DType::bf16, ScaleMode::block}, {64, 80, 6, 1, 1, 2}, {130, 1250, 1536}},
      {{e4, e5, DType::fp16, ScaleMode::block, true}, {64, 104, 6, 8}, {64, 1700, 896}},
      {{e4, e4, DType::bf16, ScaleMode::block}, {64, 112, 6, 8}, {37, 1800, 4096}},
  };
  for (const ConfigCase& c : cases) ASSERT_TRUE(gemm_geometry(c.p, c.c).pipelined) << c.c.block_n;
  run_config_cases(cases, 970, 3);
}

// Fast accumulation on 64-row tiles up to 128 columns takes the pipelined K loop (GemmGeometry::
// pipelined): two sets of sums, each over its own K blocks, added after the loop. One K block, two,
// odd and ragged counts, split-K summed in a cluster (the sets added before the sum), several tiles
// per CTA (the deferred epilogue), a 2-CTA cluster, swapped operands, bias, fp16 and fp32 out,
// e5m2, rowwise, and a K of 16384.
TEST(GemmGpu, FastAccumulationSumsInTwoSets) {
  FP8JIT_REQUIRE_GPU();
  const Fp8Format e4 = Fp8Format::e4m3, e5 = Fp8Format::e5m2;
  const GemmProblem fast{e4, e4, DType::bf16, ScaleMode::tensor, false, true};
  const std::vector<ConfigCase> cases = {
      {fast, {64, 32, 16, 8}, {37, 1000, 128}},  // one K block: the second set unused
      {fast, {64, 32, 16, 8}, {64, 1000, 256}},
      {{e4, e5, DType::fp16, ScaleMode::tensor, true, true}, {64, 64, 6, 8}, {100, 1500, 400}},
      {{e5, e4, DType::fp32, ScaleMode::rowwise, true, true}, {64, 128, 6, 8}, {130, 1000, 1040}},
      {fast, {64, 16, 16, 8}, {128, 2112, 7168}},
      {{e4, e4, DType::fp32, ScaleMode::tensor, false, true}, {64, 64, 6, 8}, {64, 2112, 7184}},
      {fast, {64, 64, 6, 8}, {1000, 3000, 1152}},
      {{e4, e4, DType::bf16, ScaleMode::rowwise, false, true},
       {64, 64, 6, 8, 1, 2},
       {130, 1250, 1536}},
      {fast, {64, 32, 16, 8}, {64, 7168, 16384}},
      {{e4, e4, DType::bf16, ScaleMode::tensor, true, true},
       {64, 8, 16, 8, 1, 1, GemmEpilogue::any, 1},
       {1, 6144, 4096}},
  };
  for (const ConfigCase& c : cases) ASSERT_TRUE(gemm_geometry(c.p, c.c).pipelined) << c.c.block_n;
  run_config_cases(cases, 1600, 3);
}

// Promotion's FFMA runs rewritten by the cubin post-pass, settings read once per process: the
// cases run in a second process with FP8JIT_FFMA_REUSE=1 (a hint on every FFMA that shares its
// factor with the next, runtime/sass/ffma_reuse.hpp).
TEST(GemmGpu, FfmaRunsThatHoldTheirFactorKeepResults) {
  FP8JIT_REQUIRE_GPU();
  char dir[] = "/tmp/fp8jit-ffma-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const int status = run_self("GemmGpuChild.FfmaRunsRewritten",
                              {"FP8JIT_FFMA_REUSE=1", std::string("FP8JIT_CACHE_DIR=") + dir,
                               "FP8JIT_CHILD_FFMA=reuse"});
  std::filesystem::remove_all(dir);
  EXPECT_EQ(status, 0) << "the second process (FP8JIT_FFMA_REUSE=1) failed (see its output above)";
}

// Runs only as the child of the test above.
TEST(GemmGpuChild, FfmaRunsRewritten) {
  if (!std::getenv("FP8JIT_CHILD_FFMA")) GTEST_SKIP() << "runs as the second process of GemmGpu.FfmaRuns...";
  FP8JIT_REQUIRE_GPU();
  ASSERT_TRUE(default_runtime().options().ffma_reuse);
  const Fp8Format e4 = Fp8Format::e4m3, e5 = Fp8Format::e5m2;
  const std::vector<ConfigCase> cases = {
      {{e4, e4, DType::bf16, ScaleMode::block}, {128, 256, 3, 16}, {1000, 2112, 7168}},  // column halves
      {{e5, e4, DType::fp32, ScaleMode::block}, {128, 256, 2, 8}, {130, 600, 1040}},
      {{e4, e4, DType::bf16, ScaleMode::block}, {128, 192, 4, 16}, {4096, 2112, 1024}},
      {{e5, e4, DType::bf16, ScaleMode::block}, {128, 144, 5, 8}, {300, 1000, 2048}},   // deferred epilogue
      {{e4, e4, DType::fp16, ScaleMode::block}, {64, 64, 6, 8}, {64, 2112, 7168}},      // split-K
      {{e4, e4, DType::bf16, ScaleMode::group}, {128, 128, 5, 16}, {257, 640, 1536}},
  };
  // The kernels that run are the rewritten ones: a second pass finds nothing left to change.
  // ptxas already hints every FFMA of some (64x64).
  int rewritten = 0;
  for (const ConfigCase& c : cases) {
    const KernelSpec spec = make_gemm_spec(c.p, c.c);
    std::string cubin = default_runtime().compile(spec);
    std::string fresh = nvrtc_compile(spec_name(spec), render_source(spec), CompileTarget::cubin).binary;
    const int before = hold_ffma_factors(fresh).held;
    EXPECT_EQ(hold_ffma_factors(cubin).held, 0) << spec_name(spec);
    rewritten += before;
  }
  EXPECT_GT(rewritten, 100);
  run_config_cases(cases, 900, 2);
}

TEST(GemmGpu, NanInputNeverPasses) {
  FP8JIT_REQUIRE_GPU();
  GemmProblem p;
  Operands o = make_operands(p, 64, 64, 128, 5);
  const unsigned char nan = 0x7F;
  ASSERT_EQ(cudaSuccess, cudaMemcpy(static_cast<unsigned char*>(o.a->get()) + 3 * 128 + 5, &nan, 1, cudaMemcpyHostToDevice));
  EXPECT_EQ(run_and_compare(o.args, 0), INFINITY);
}

TEST(GemmGpu, BadInputIsRejectedAndNothingWritten) {
  FP8JIT_REQUIRE_GPU();
  GemmProblem p;
  Operands o = make_operands(p, 64, 64, 128, 9);
  DeviceMem d(64 * 64 * 2);
  d.poison(0x5A);
  GemmArgs g = o.args;
  g.d = d.get();
  auto expect_invalid = [&](GemmArgs bad, const char* what) {
    try {
      default_runtime().gemm(bad, nullptr);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_argument) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  GemmArgs b = g; b.k = 100; expect_invalid(b, "multiple of 16");
  b = g; b.n = 0; expect_invalid(b, "n");
  b = g; b.scale_b_size = 1; expect_invalid(b, "scale_b_size");
  b = g; b.a_format = b.b_format = Fp8Format::e5m2; expect_invalid(b, "e5m2");
  b = g; b.lda = 64; expect_invalid(b, "lda");
  b = g; b.b = nullptr; expect_invalid(b, "b");
  for (unsigned char byte : d.download()) ASSERT_EQ(byte, 0x5A);
}

}  // namespace
}  // namespace fp8jit::test
