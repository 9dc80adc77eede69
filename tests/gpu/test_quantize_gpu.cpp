// quantize on the GPU against the host reference: bit-exact FP8 bytes, scales and amax, for every
// granularity x format x input dtype, on random data and edge cases, with poisoned outputs whose
// untouched bytes (row padding, scale padding) must stay poisoned.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "fp8jit/error.hpp"
#include "fp8jit/fp8.hpp"
#include "fp8jit/reference.hpp"
#include "fp8jit/runtime.hpp"
#include "tests/common/gpu_env.hpp"
#include "tests/common/ptx_runtime.hpp"
#include "tests/common/temp_dir.hpp"

namespace fp8jit::test {
namespace {

constexpr unsigned char kPoison = 0xA5;

struct Shape {
  std::int64_t m, k, pad;  // pad: extra elements per row (pad % 4 != 0 exercises the unaligned path)
};

struct QuantCase {
  DType input;
  Fp8Format format;
  Granularity granularity;
  bool transpose;
};

std::string case_name(const testing::TestParamInfo<QuantCase>& info) {
  const QuantCase& c = info.param;
  std::string g(to_string(c.granularity));
  for (char& ch : g) if (ch == 'x') ch = '_';
  return std::string(to_string(c.input)) + "_" + std::string(to_string(c.format)) + "_g" + g +
         (c.transpose ? "_tr" : "");
}

std::vector<QuantCase> all_cases() {
  std::vector<QuantCase> out;
  for (DType in : {DType::bf16, DType::fp16, DType::fp32})
    for (Fp8Format f : {Fp8Format::e4m3, Fp8Format::e5m2})
      for (Granularity g : {Granularity::tensor, Granularity::row, Granularity::group128, Granularity::block128})
        for (bool tr : {false, true})
          out.push_back({in, f, g, tr});
  return out;
}

class QuantizeGpu : public testing::TestWithParam<QuantCase> {};

// Runs one configuration on the GPU and on the host and compares whole buffers.
void check_one(const QuantCase& c, const Shape& s, int variant, unsigned seed, Runtime& rt) {
  SCOPED_TRACE(testing::Message() << "m=" << s.m << " k=" << s.k << " pad=" << s.pad << " variant=" << variant);
  const bool edge = variant % 2 == 1;
  QuantizeArgs a;
  a.input = c.input;
  a.format = c.format;
  a.granularity = c.granularity;
  a.m = s.m;
  a.k = s.k;
  a.ldx = s.k + s.pad;
  a.ldq = s.k + s.pad;
  a.scale_layout = variant % 2 ? ScaleLayout::col_major_tma : ScaleLayout::row_major;
  a.pow2_scale = (variant / 2) % 2 == 1;
  const bool use_static = c.granularity == Granularity::tensor && variant == 2;
  const std::int64_t ns = scale_count(a.granularity, a.scale_layout, a.m, a.k);
  const std::int64_t ldqt = s.m + s.pad;
  const std::int64_t nst = c.transpose && (c.granularity == Granularity::group128 || c.granularity == Granularity::row)
                               ? scale_count(c.granularity, a.scale_layout, a.k, a.m) : 0;
  const auto xh = random_tensor(a.m, a.ldx, a.k, a.input, seed, edge);
  DeviceMem x(xh.size()), q(a.m * a.ldq), sc(4 * ns), qt(c.transpose ? a.k * ldqt : 0), st(4 * nst),
      amax(4), stat(4);
  x.upload(xh.data(), xh.size());
  for (DeviceMem* d : {&q, &sc, &qt, &st, &amax}) d->poison(kPoison);
  const float static_scale = 0.0371f;
  stat.upload(&static_scale, 4);
  a.x = x.get();
  a.q = q.get();
  a.scales = sc.f32();
  a.amax = amax.f32();
  if (use_static) a.static_scale = stat.f32();
  if (c.transpose) {
    a.qt = qt.get();
    a.ldqt = ldqt;
    if (nst) a.scales_t = st.f32();
  }
  rt.quantize(a, nullptr);
  const auto got_q = q.download(), got_s = sc.download(), got_qt = qt.download(), got_st = st.download(),
             got_amax = amax.download();

  std::vector<unsigned char> want_q(got_q.size(), kPoison), want_s(got_s.size(), kPoison),
      want_qt(got_qt.size(), kPoison), want_st(got_st.size(), kPoison), want_amax(4, kPoison);
  QuantizeArgs h = a;
  h.x = xh.data();
  h.q = want_q.data();
  h.scales = reinterpret_cast<float*>(want_s.data());
  h.amax = reinterpret_cast<float*>(want_amax.data());
  h.static_scale = use_static ? &static_scale : nullptr;
  h.qt = c.transpose ? want_qt.data() : nullptr;
  h.scales_t = nst ? reinterpret_cast<float*>(want_st.data()) : nullptr;
  reference::quantize(h);

  auto first_diff = [](const std::vector<unsigned char>& g, const std::vector<unsigned char>& w) -> long {
    for (std::size_t i = 0; i < g.size(); ++i) if (g[i] != w[i]) return static_cast<long>(i);
    return -1;
  };
  EXPECT_EQ(first_diff(got_q, want_q), -1) << "q differs";
  EXPECT_EQ(first_diff(got_s, want_s), -1) << "scales differ";
  EXPECT_EQ(first_diff(got_qt, want_qt), -1) << "qt differs";
  EXPECT_EQ(first_diff(got_st, want_st), -1) << "scales_t differ";
  EXPECT_EQ(first_diff(got_amax, want_amax), -1) << "amax differs";
  // Scales are always finite and positive, even for all-zero groups and inf inputs.
  for (std::int64_t i = 0; i < ns; ++i) {
    const unsigned char* w = want_s.data() + 4 * i;
    if (w[0] == kPoison && w[1] == kPoison && w[2] == kPoison && w[3] == kPoison) continue;  // padding
    float v;
    std::memcpy(&v, got_s.data() + 4 * i, 4);
    EXPECT_TRUE(std::isfinite(v) && v > 0) << "scale " << i << " = " << v;
  }
}

TEST_P(QuantizeGpu, MatchesHostReferenceBitExact) {
  FP8JIT_REQUIRE_GPU();
  const std::vector<Shape> shapes = {{1, 16, 0}, {7, 100, 3}, {130, 300, 0}, {257, 1000, 8}, {64, 7168, 0}, {300, 129, 1}};
  unsigned seed = 11;
  for (const Shape& s : shapes)
    for (int variant = 0; variant < 4; ++variant)
      check_one(GetParam(), s, variant, seed++, default_runtime());
}

INSTANTIATE_TEST_SUITE_P(All, QuantizeGpu, testing::ValuesIn(all_cases()), case_name);

// The compute_89 PTX build (what Ada GPUs and GPUs newer than this NVRTC run), compiled by the
// driver for this GPU: the same bytes as the host reference, every case on two ragged shapes.
TEST(QuantizeGpuPtx, Compute89MatchesHostReferenceBitExact) {
  FP8JIT_REQUIRE_GPU();
  const TempDir dir("fp8jit_ptx_quant");
  // PDL asked for: a build without griddepcontrol.wait must launch without the attribute.
  RuntimeOptions o = compute89_options(dir.path());
  o.pdl = true;
  Runtime rt(o);
  unsigned seed = 500;
  for (const QuantCase& c : all_cases()) {
    SCOPED_TRACE(case_name(testing::TestParamInfo<QuantCase>(c, 0)));
    for (const Shape& s : {Shape{7, 100, 3}, Shape{257, 1000, 8}})
      for (int variant = 0; variant < 4; ++variant) check_one(c, s, variant, seed++, rt);
  }
  EXPECT_GT(expect_only_compute89_ptx(dir.path()), 0);
}

TEST(QuantizeGpuBadInput, RejectedBeforeAnythingIsWritten) {
  FP8JIT_REQUIRE_GPU();
  DeviceMem x(4096), q(4096), s(4096);
  q.poison();
  QuantizeArgs a;
  a.x = x.get();
  a.q = q.get();
  a.scales = s.f32();
  a.m = 8;
  a.k = 128;
  auto expect_invalid = [&](QuantizeArgs bad, const char* what) {
    try {
      default_runtime().quantize(bad, nullptr);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_argument) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  QuantizeArgs b = a; b.x = nullptr; expect_invalid(b, "x");
  b = a; b.m = 0; expect_invalid(b, "m");
  b = a; b.k = -5; expect_invalid(b, "k");
  b = a; b.ldx = 100; expect_invalid(b, "ldx");
  b = a; b.x = static_cast<char*>(x.get()) + 1; expect_invalid(b, "x");
  b = a; b.granularity = Granularity::row; b.qt = q.get(); expect_invalid(b, "scales_t");  // per row: qt needs its own scales
  b = a; b.granularity = Granularity::block128; b.qt = q.get(); b.scales_t = s.f32(); expect_invalid(b, "scales_t");
  b = a; b.static_scale = s.f32(); expect_invalid(b, "static_scale");
  const auto after = q.download();
  for (unsigned char byte : after) ASSERT_EQ(byte, kPoison);
}

// Writes GPU FP8 bytes and their inputs for tests/gpu/torch_check.py (run by the GPU script):
// pow2 scales make 1/scale exact, so torch can form the very same scaled values.
TEST(QuantizeGpuTorchDump, WritesCasesForTorch) {
  FP8JIT_REQUIRE_GPU();
  const char* dir = std::getenv("FP8JIT_TORCH_DUMP");
  if (!dir) GTEST_SKIP() << "FP8JIT_TORCH_DUMP not set";
  for (Fp8Format f : {Fp8Format::e4m3, Fp8Format::e5m2}) {
    QuantizeArgs a;
    a.format = f;
    a.m = 513;
    a.k = 1000;
    a.pow2_scale = true;
    const auto xh = random_tensor(a.m, a.k, a.k, DType::fp32, 99, true);
    DeviceMem x(xh.size()), q(a.m * a.k), s(4 * scale_count(a.granularity, a.scale_layout, a.m, a.k));
    x.upload(xh.data(), xh.size());
    q.poison();
    a.input = DType::fp32;
    a.x = x.get();
    a.q = q.get();
    a.scales = s.f32();
    default_runtime().quantize(a, nullptr);
    const std::string base = std::string(dir) + "/" + std::string(to_string(f));
    std::ofstream(base + ".x.f32", std::ios::binary).write(reinterpret_cast<const char*>(xh.data()), xh.size());
    const auto qb = q.download(), sb = s.download();
    std::ofstream(base + ".q.u8", std::ios::binary).write(reinterpret_cast<const char*>(qb.data()), qb.size());
    std::ofstream(base + ".s.f32", std::ios::binary).write(reinterpret_cast<const char*>(sb.data()), sb.size());
  }
}

}  // namespace
}  // namespace fp8jit::test
