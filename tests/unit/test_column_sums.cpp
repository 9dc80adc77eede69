// Column sums of the quantize family (QuantizeProblem::column_sums, QuantizeArgs::column_sums):
// spec rules, names, entry points and shared memory, the generated source through NVRTC, argument
// checks through the runtime and the C ABI, and the host reference's summation order. No GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fp8jit/error.hpp"
#include "fp8jit/fp8jit.h"
#include "fp8jit/kernel_spec.hpp"
#include "fp8jit/reference.hpp"
#include "fp8jit/runtime.hpp"
#include "generator/family.hpp"
#include "runtime/jit/nvrtc.hpp"
#include "tests/common/expect_error.hpp"
#include "tests/common/fake_pointers.hpp"

namespace fp8jit {
namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

QuantizeProblem problem(Granularity g, bool transpose = true, bool sums = true,
                        DType in = DType::bf16) {
  QuantizeProblem p;
  p.input = in;
  p.granularity = g;
  p.transpose = transpose;
  p.column_sums = sums;
  return p;
}

const Granularity kGranularities[] = {Granularity::tensor, Granularity::row, Granularity::group128,
                                      Granularity::block128};

KernelSpec with(KernelSpec s, const std::string& key, ParamValue v) {
  s.params[key] = std::move(v);
  return s;
}

TEST(ColumnSumsSpec, NeedTheTransposedCastAndIeeeArithmetic) {
  for (Granularity g : kGranularities) EXPECT_NO_THROW((void)default_quantize_spec(problem(g)));
  const KernelSpec ok = default_quantize_spec(problem(Granularity::group128));
  const std::string no_transpose = test::error_message(
      ErrorKind::invalid_argument, [&] { validate_spec(with(ok, "transpose", std::int64_t{0})); });
  EXPECT_TRUE(contains(no_transpose, "column_sums = 1")) << no_transpose;
  EXPECT_TRUE(contains(no_transpose, "transpose = 1 and arithmetic = ieee")) << no_transpose;
  // DeepSeek's arithmetic (1x128 E4M3, no transpose) with column sums: refused by the column-sums
  // rule, and with a transpose by DeepSeek's.
  KernelSpec ds =
      with(with(ok, "transpose", std::int64_t{0}), "arithmetic", std::string("deepseek"));
  const std::string deepseek =
      test::error_message(ErrorKind::invalid_argument, [&] { validate_spec(ds); });
  EXPECT_TRUE(contains(deepseek, "column_sums = 1")) << deepseek;
  EXPECT_THROW(validate_spec(with(ds, "transpose", std::int64_t{1})), Error);
  // The typed front door refuses the same problems.
  EXPECT_THROW((void)make_quantize_spec(problem(Granularity::group128, false), {8, 256, 1}), Error);
  EXPECT_THROW((void)make_quantize_spec(problem(Granularity::block128, false), {8, 256, 1}), Error);
}

TEST(ColumnSumsSpec, NameSuffixAndUnchangedDefaults) {
  for (Granularity g : kGranularities) {
    const KernelSpec plain = default_quantize_spec(problem(g, true, false));
    const KernelSpec sums = default_quantize_spec(problem(g));
    SCOPED_TRACE(spec_name(sums));
    EXPECT_FALSE(contains(spec_name(plain), "_cs")) << spec_name(plain);
    EXPECT_TRUE(contains(spec_name(sums), "_tr_cs_")) << spec_name(sums);
    EXPECT_EQ(spec_name(sums), [&] {
      std::string n = spec_name(plain);
      return n.insert(n.find("_tr") + 3, "_cs");
    }());
    // column_sums = 0 is left out of the JSON (and so of hashes, cache files and tuning keys).
    EXPECT_FALSE(contains(spec_to_json(plain), "column_sums")) << spec_to_json(plain);
    EXPECT_TRUE(contains(spec_to_json(sums), "\"column_sums\":1")) << spec_to_json(sums);
    EXPECT_NE(spec_hash(plain), spec_hash(sums));
    EXPECT_EQ(spec_from_json(spec_to_json(sums)), sums);
    EXPECT_TRUE(quantize_problem_of(sums).column_sums);
    EXPECT_FALSE(quantize_problem_of(plain).column_sums);
  }
  // A spec written before the parameter existed reads as column_sums = 0.
  const KernelSpec old = spec_from_json(
      R"({"family":"quantize","problem":{"input":"bf16","format":"e4m3","granularity":"1x128","transpose":1},)"
      R"("config":{"vec":8,"threads":256,"unroll":1}})");
  EXPECT_EQ(old.i("column_sums"), 0);
  EXPECT_EQ(spec_name(old), "quant_sm90_bf16_e4m3_1x128_tr_v8_t256_u1");
}

TEST(ColumnSumsSpec, EntryPointsEndWithTheColumnSumKernel) {
  const std::vector<std::string> passes = {"fp8jit_amax", "fp8jit_quantize", "fp8jit_finalize",
                                           "fp8jit_colsum"};
  EXPECT_EQ(spec_entry_points(default_quantize_spec(problem(Granularity::tensor))), passes);
  EXPECT_EQ(spec_entry_points(default_quantize_spec(problem(Granularity::row))), passes);
  const std::vector<std::string> one = {"fp8jit_quantize", "fp8jit_colsum"};
  EXPECT_EQ(spec_entry_points(default_quantize_spec(problem(Granularity::group128))), one);
  EXPECT_EQ(spec_entry_points(default_quantize_spec(problem(Granularity::block128))), one);
  EXPECT_EQ(spec_entry_points(default_quantize_spec(problem(Granularity::group128, true, false))),
            std::vector<std::string>{"fp8jit_quantize"});
}

// The per-thread folds pass through the tile's shared memory (threads * vec / 128 rows of 128
// floats), which grows only where they need more; the float-staged tile (fewer than 256 threads,
// 1x128 and 128x128) is summed in place.
TEST(ColumnSumsSpec, SharedMemoryGrowsOnlyWhereTheFoldsNeedIt) {
  for (Granularity g : kGranularities)
    for (int vec : {4, 8, 16})
      for (int threads : {64, 128, 256, 512}) {
        const ElementwiseConfig c{vec, threads, g == Granularity::tensor ? 2 : 1};
        const KernelSpec plain = make_quantize_spec(problem(g, true, false), c);
        const KernelSpec sums = make_quantize_spec(problem(g), c);
        SCOPED_TRACE(spec_name(sums));
        const bool float_tile =
            (g == Granularity::group128 || g == Granularity::block128) && threads < 256;
        const int folds = float_tile ? 0 : threads * vec / 128 * 128 * 4;
        EXPECT_EQ(spec_dynamic_smem(sums), std::max(spec_dynamic_smem(plain), folds));
      }
}

TEST(ColumnSumsSpec, SourceInstantiatesTheSummingTile) {
  const std::string src = render_source(default_quantize_spec(problem(Granularity::group128)));
  EXPECT_TRUE(contains(src, "/*COLSUM=*/true>")) << src;
  EXPECT_TRUE(contains(src, "fp8jit_colsum(const __grid_constant__ QuantParams p)")) << src;
  const std::string plain =
      render_source(default_quantize_spec(problem(Granularity::group128, true, false)));
  EXPECT_FALSE(contains(plain, "COLSUM")) << plain;
  EXPECT_FALSE(contains(plain, "fp8jit_colsum")) << plain;
}

// Every path of the tile strategy (staged bytes: tensor and row; registers: 1x128 and 128x128 with
// 256 threads; the float tile: 128 threads) compiles for sm_90a without a warning.
TEST(ColumnSumsCompile, EveryGranularityBf16) {
  std::vector<KernelSpec> specs;
  for (Granularity g : kGranularities) specs.push_back(default_quantize_spec(problem(g)));
  specs.push_back(make_quantize_spec(problem(Granularity::group128), {8, 128, 1}));
  specs.push_back(
      make_quantize_spec(problem(Granularity::block128, true, true, DType::fp32), {4, 64, 1}));
  for (const KernelSpec& s : specs) {
    SCOPED_TRACE(spec_name(s));
    const CompileResult r = nvrtc_compile(spec_name(s), render_source(s), CompileTarget::cubin);
    EXPECT_EQ(r.binary.compare(0, 4,
                               "\x7f"
                               "ELF"),
              0);
    EXPECT_FALSE(contains(r.log, "warning")) << r.log;
    for (const std::string& entry : spec_entry_points(s))
      EXPECT_TRUE(contains(r.binary, entry)) << entry;
  }
}

// ---- arguments, without a GPU --------------------------------------------------------------

using test::fake;
using test::fake_f;

QuantizeArgs transposed_args() {
  QuantizeArgs a;
  a.x = fake(0x10000);
  a.m = 300;
  a.k = 200;
  a.q = fake(0x200000);
  a.scales = fake_f(0x400000);
  a.qt = fake(0x600000);
  a.scales_t = fake_f(0x700000);
  return a;
}

TEST(ColumnSumsArgs, SelectTakesTheSummingKernel) {
  Runtime rt(RuntimeOptions{""});
  QuantizeArgs a = transposed_args();
  EXPECT_FALSE(quantize_problem_of(rt.select(a)).column_sums);
  a.column_sums = fake_f(0x800000);
  const KernelSpec s = rt.select(a);
  EXPECT_TRUE(quantize_problem_of(s).column_sums);
  EXPECT_TRUE(contains(spec_name(s), "_cs_")) << spec_name(s);
}

TEST(ColumnSumsArgs, RefusedByNameBeforeTheDriver) {
  Runtime rt(RuntimeOptions{""});
  QuantizeArgs a = transposed_args();
  a.column_sums = fake_f(0x800000);
  QuantizeArgs no_qt = a;
  no_qt.qt = nullptr;
  no_qt.scales_t = nullptr;
  QuantizeArgs misaligned = a;
  misaligned.column_sums = fake_f(0x800002);
  QuantizeArgs deepseek = no_qt;
  deepseek.deepseek_arithmetic = true;
  for (const auto& [args, needle] :
       {std::pair{no_qt,
                  "invalid column_sums = 0x800000: column sums come with the "
                  "transposed output"},
        std::pair{misaligned, "invalid column_sums = 0x800002: must be aligned to 4"},
        std::pair{deepseek, "invalid column_sums"}}) {
    SCOPED_TRACE(needle);
    for (const std::string& msg :
         {test::error_message(ErrorKind::invalid_argument, [&] { rt.quantize(args, nullptr); }),
          test::error_message(ErrorKind::invalid_argument, [&] { (void)rt.select(args); })})
      EXPECT_TRUE(contains(msg, needle)) << msg;
  }
  // A spec and arguments that disagree on column sums, either way.
  QuantizeArgs plain = a;
  plain.column_sums = nullptr;
  const KernelSpec with_sums = default_quantize_spec(problem(Granularity::group128));
  const KernelSpec without = default_quantize_spec(problem(Granularity::group128, true, false));
  const std::string m1 = test::error_message(ErrorKind::invalid_argument,
                                             [&] { rt.quantize(plain, with_sums, nullptr); });
  EXPECT_TRUE(contains(m1, "writes column sums: give column_sums")) << m1;
  const std::string m2 =
      test::error_message(ErrorKind::invalid_argument, [&] { rt.quantize(a, without, nullptr); });
  EXPECT_TRUE(contains(m2, "writes no column sums")) << m2;
  EXPECT_EQ(rt.cache_stats().compiles, 0u);
}

TEST(ColumnSumsArgs, CAbiDefaultsToNullAndPassesThePointer) {
  fp8jit_quantize_args c;
  std::memset(&c, 0xAB, sizeof c);
  fp8jit_quantize_args_init(&c);
  EXPECT_EQ(c.column_sums, nullptr);
  fp8jit_runtime* rt = nullptr;
  ASSERT_EQ(fp8jit_runtime_create_with_cache_dir(nullptr, &rt), FP8JIT_SUCCESS)
      << fp8jit_last_error();
  c.x = fake(0x10000);
  c.q = fake(0x200000);
  c.scales = fake_f(0x400000);
  c.m = 300;
  c.k = 200;
  c.column_sums = fake_f(0x800000);  // without qt
  EXPECT_EQ(fp8jit_quantize(rt, &c, nullptr), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(fp8jit_last_error(), "invalid column_sums = 0x800000"))
      << fp8jit_last_error();
  fp8jit_runtime_destroy(rt);
}

// ---- the host reference's order --------------------------------------------------------------

// The order the kernels sum in (column_sums.cuh), spelled out independently of the reference.
std::vector<float> documented_sums(const std::vector<float>& x, std::int64_t m, std::int64_t k) {
  std::vector<float> out(k);
  for (std::int64_t c = 0; c < k; ++c) {
    float sum = 0.0f;
    for (std::int64_t r0 = 0; r0 < m; r0 += 128) {
      std::vector<float> a(128, 0.0f);
      for (std::int64_t r = 0; r < 128 && r0 + r < m; ++r) a[r] = x[(r0 + r) * k + c];
      for (std::int64_t n = 64; n >= 1; n /= 2)
        for (std::int64_t r = 0; r < n; ++r) a[r] += a[r + n];
      sum += a[0];
    }
    out[c] = sum;
  }
  return out;
}

struct HostQuantize {
  std::int64_t m, k;
  std::vector<float> x;
  std::vector<std::uint8_t> q, qt;
  std::vector<float> scales, scales_t, sums;
  HostQuantize(std::int64_t m_, std::int64_t k_)
      : m(m_), k(k_), x(m_ * k_, 0.0f), q(m_ * k_), qt(m_ * k_) {}
  QuantizeArgs args(Granularity g) {
    QuantizeArgs a;
    a.x = x.data();
    a.input = DType::fp32;
    a.m = m;
    a.k = k;
    a.q = q.data();
    a.granularity = g;
    scales.assign(scale_count(g, ScaleLayout::row_major, m, k), -1.0f);
    a.scales = scales.data();
    a.qt = qt.data();
    if (g == Granularity::group128 || g == Granularity::row) {
      scales_t.assign(scale_count(g, ScaleLayout::row_major, k, m), -1.0f);
      a.scales_t = scales_t.data();
    }
    sums.assign(k, -1.0f);
    a.column_sums = sums.data();
    return a;
  }
};

TEST(ColumnSumsReference, FoldsEachTileThenAddsTheTilesInOrder) {
  HostQuantize h(300, 3);                    // tiles of 128, 128 and 44 rows
  const float tiny = std::ldexp(1.0f, -24);  // half an ulp of 1
  // Column 0: 1 + tiny + tiny in one tile. Left to right, each tiny rounds away (ties to even); the
  // fold pairs rows 1 and 65 first, and 1 + 2 tiny is exact.
  h.x[0 * 3] = 1.0f, h.x[1 * 3] = tiny, h.x[65 * 3] = tiny;
  // Column 1: values in every tile, the last one cut at row 300.
  for (std::int64_t r = 0; r < 300; ++r) h.x[r * 3 + 1] = 0.1f * static_cast<float>(r % 7) - 0.25f;
  // Column 2: the tiles' sums 1, tiny, tiny: added in tile order the tinies round away.
  h.x[5 * 3 + 2] = 1.0f, h.x[130 * 3 + 2] = tiny, h.x[299 * 3 + 2] = tiny;
  const std::vector<float> expected = documented_sums(h.x, 300, 3);
  for (Granularity g : kGranularities) {
    SCOPED_TRACE(to_string(g));
    reference::quantize(h.args(g));
    for (std::int64_t c = 0; c < 3; ++c) EXPECT_EQ(h.sums[c], expected[c]) << "column " << c;
  }
  EXPECT_EQ(h.sums[0], 1.0f + 2 * tiny);
  EXPECT_EQ(h.sums[2], 1.0f);
  // Near torch's x.sum(0) in double.
  double exact = 0;
  for (std::int64_t r = 0; r < 300; ++r) exact += h.x[r * 3 + 1];
  EXPECT_NEAR(h.sums[1], exact, 1e-4);
}

TEST(ColumnSumsReference, OtherOutputsUnchanged) {
  HostQuantize h(200, 130);
  for (std::size_t i = 0; i < h.x.size(); ++i)
    h.x[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
  for (Granularity g : kGranularities) {
    SCOPED_TRACE(to_string(g));
    QuantizeArgs a = h.args(g);
    reference::quantize(a);
    const auto q = h.q, qt = h.qt;
    const auto s = h.scales, st = h.scales_t;
    a.column_sums = nullptr;
    std::fill(h.q.begin(), h.q.end(), 0);
    std::fill(h.qt.begin(), h.qt.end(), 0);
    reference::quantize(a);
    EXPECT_EQ(h.q, q);
    EXPECT_EQ(h.qt, qt);
    EXPECT_EQ(h.scales, s);
    EXPECT_EQ(h.scales_t, st);
  }
}

}  // namespace
}  // namespace fp8jit
