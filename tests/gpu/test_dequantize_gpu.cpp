// dequantize on the GPU against the host reference, bit-exact, all 256 codes of each format,
// every granularity, scale layout and output dtype; outputs poisoned.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "fp8jit/reference.hpp"
#include "fp8jit/runtime.hpp"
#include "tests/common/gpu_env.hpp"
#include "tests/common/ptx_runtime.hpp"
#include "tests/common/temp_dir.hpp"

namespace fp8jit::test {
namespace {

struct DequantCase {
  Fp8Format format;
  DType output;
  Granularity granularity;
};

std::vector<DequantCase> all_cases() {
  std::vector<DequantCase> out;
  for (Fp8Format f : {Fp8Format::e4m3, Fp8Format::e5m2})
    for (DType o : {DType::bf16, DType::fp16, DType::fp32})
      for (Granularity g : {Granularity::tensor, Granularity::row, Granularity::group128, Granularity::block128})
        out.push_back({f, o, g});
  return out;
}

std::string case_name(const testing::TestParamInfo<DequantCase>& info) {
  std::string g(to_string(info.param.granularity));
  for (char& ch : g) if (ch == 'x') ch = '_';
  return std::string(to_string(info.param.format)) + "_" + std::string(to_string(info.param.output)) + "_g" + g;
}

class DequantizeGpu : public testing::TestWithParam<DequantCase> {};

// Every shape and scale layout of case `c` on `rt`, against the host reference.
void check_case(const DequantCase& c, Runtime& rt) {
  SCOPED_TRACE(case_name(testing::TestParamInfo<DequantCase>(c, 0)));
  struct Shape { std::int64_t m, k, pad; };
  std::mt19937 rng(5);
  int variant = 0;
  for (const Shape& s : std::vector<Shape>{{1, 16, 0}, {7, 100, 3}, {130, 300, 0}, {257, 1000, 16}, {129, 4096, 0}}) {
    for (ScaleLayout layout : {ScaleLayout::row_major, ScaleLayout::col_major_tma}) {
      SCOPED_TRACE(testing::Message() << "m=" << s.m << " k=" << s.k << " layout=" << to_string(layout));
      DequantizeArgs a;
      a.format = c.format;
      a.output = c.output;
      a.granularity = c.granularity;
      a.scale_layout = layout;
      a.m = s.m;
      a.k = s.k;
      a.ldq = s.k + s.pad;
      a.ldy = s.k + s.pad;
      const std::int64_t ns = scale_count(a.granularity, layout, a.m, a.k);
      std::vector<unsigned char> qh(a.m * a.ldq);
      for (auto& b : qh) b = static_cast<unsigned char>(rng());  // every code, NaN and inf included
      std::vector<float> sh(ns);
      for (auto& v : sh) v = std::ldexp(0.5f + (rng() % 4096) / 4096.0f, static_cast<int>(rng() % 40) - 20);
      if (++variant % 3 == 0) sh[0] = 1e-30f;  // products underflow into subnormals
      DeviceMem q(qh.size()), sc(4 * ns), y(a.m * a.ldy * dtype_size(a.output));
      q.upload(qh.data(), qh.size());
      sc.upload(sh.data(), 4 * ns);
      y.poison();
      a.q = q.get();
      a.scales = sc.f32();
      a.y = y.get();
      rt.dequantize(a, nullptr);
      const auto got = y.download();
      std::vector<unsigned char> want(got.size(), 0xA5);
      DequantizeArgs h = a;
      h.q = qh.data();
      h.scales = sh.data();
      h.y = want.data();
      reference::dequantize(h);
      long first = -1;
      for (std::size_t i = 0; i < got.size() && first < 0; ++i) if (got[i] != want[i]) first = static_cast<long>(i);
      EXPECT_EQ(first, -1) << "first differing byte";
    }
  }
}

TEST_P(DequantizeGpu, MatchesHostReferenceBitExact) {
  FP8JIT_REQUIRE_GPU();
  check_case(GetParam(), default_runtime());
}

INSTANTIATE_TEST_SUITE_P(All, DequantizeGpu, testing::ValuesIn(all_cases()), case_name);

// The compute_89 PTX build, compiled by the driver for this GPU: the same bytes.
TEST(DequantizeGpuPtx, Compute89MatchesHostReferenceBitExact) {
  FP8JIT_REQUIRE_GPU();
  const TempDir dir("fp8jit_ptx_dequant");
  Runtime rt(compute89_options(dir.path()));
  for (const DequantCase& c : all_cases()) check_case(c, rt);
  EXPECT_GT(expect_only_compute89_ptx(dir.path()), 0);
}

}  // namespace
}  // namespace fp8jit::test
