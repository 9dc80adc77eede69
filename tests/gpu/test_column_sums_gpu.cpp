// quantize with column sums on the GPU (QuantizeArgs::column_sums): every granularity of the
// transposed cast, every input type and ragged shapes (M and K not multiples of 128). With poisoned
// outputs, q, scales, qt and scales_t are the bytes of the same call without column sums, and the
// column sums the host reference's bits (its order is the kernels', whatever the config).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "fp8jit/error.hpp"
#include "fp8jit/reference.hpp"
#include "fp8jit/runtime.hpp"
#include "tests/common/gpu_env.hpp"

namespace fp8jit::test {
namespace {

constexpr unsigned char kPoison = 0xA5;

struct Shape {
  std::int64_t m, k, pad;  // pad: extra elements per row of x and q (odd: the element-wise path)
};

struct Outputs {
  std::vector<unsigned char> q, scales, qt, scales_t, sums;
};

bool uses_scales_t(Granularity g) {
  return g == Granularity::group128 || g == Granularity::row;
}

// The arguments' input, granularity and shape (rows padded by s.pad), no pointers yet.
QuantizeArgs shape_args(Granularity g, DType in, const Shape& s) {
  QuantizeArgs a;
  a.input = in;
  a.granularity = g;
  a.m = s.m;
  a.k = s.k;
  a.ldx = a.ldq = s.k + s.pad;
  return a;
}

// One transposed quantize of xh on the GPU, every output poisoned first; with `sums`, also the
// column sums. `spec`: that kernel instead of the runtime's choice.
Outputs run_gpu(Granularity g, DType in, const Shape& s, const std::vector<unsigned char>& xh,
                bool sums, const KernelSpec* spec = nullptr) {
  QuantizeArgs a = shape_args(g, in, s);
  const std::int64_t ns = scale_count(g, a.scale_layout, a.m, a.k);
  const std::int64_t nst = uses_scales_t(g) ? scale_count(g, a.scale_layout, a.k, a.m) : 0;
  DeviceMem x(xh.size()), q(a.m * a.ldq), sc(4 * ns), qt(a.k * a.m), st(4 * nst), cs(4 * a.k);
  x.upload(xh.data(), xh.size());
  for (DeviceMem* d : {&q, &sc, &qt, &st, &cs}) d->poison(kPoison);
  a.x = x.get();
  a.q = q.get();
  a.scales = sc.f32();
  a.qt = qt.get();
  if (nst) a.scales_t = st.f32();
  if (sums) a.column_sums = cs.f32();
  if (spec)
    default_runtime().quantize(a, *spec, nullptr);
  else
    default_runtime().quantize(a, nullptr);
  return {q.download(), sc.download(), qt.download(), st.download(), cs.download()};
}

std::vector<float> reference_sums(Granularity g, DType in, const Shape& s,
                                  const std::vector<unsigned char>& xh) {
  QuantizeArgs h = shape_args(g, in, s);
  std::vector<unsigned char> q(h.m * h.ldq), qt(h.k * h.m);
  std::vector<float> sc(scale_count(g, h.scale_layout, h.m, h.k)), sums(h.k);
  std::vector<float> st(uses_scales_t(g) ? scale_count(g, h.scale_layout, h.k, h.m) : 0);
  h.x = xh.data();
  h.q = q.data();
  h.scales = sc.data();
  h.qt = qt.data();
  h.scales_t = st.empty() ? nullptr : st.data();
  h.column_sums = sums.data();
  reference::quantize(h);
  return sums;
}

// Bit for bit; NaNs (inputs with NaN, or inf - inf) compare equal whatever their payload and sign,
// which the GPU and the host's SSE choose differently.
void expect_sums(const std::vector<unsigned char>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), 4 * want.size());
  int reported = 0;
  for (std::size_t c = 0; c < want.size() && reported < 5; ++c) {
    float v;
    std::memcpy(&v, got.data() + 4 * c, 4);
    if (std::isnan(v) && std::isnan(want[c])) continue;
    std::uint32_t gb, wb;
    std::memcpy(&gb, &v, 4);
    std::memcpy(&wb, &want[c], 4);
    if (gb != wb) {
      ADD_FAILURE() << "column " << c << ": got " << v << " (0x" << std::hex << gb << "), want "
                    << want[c] << " (0x" << wb << std::dec << ")";
      ++reported;
    }
  }
}

void expect_same_casts(const Outputs& with, const Outputs& without) {
  EXPECT_TRUE(with.q == without.q) << "q differs with column sums";
  EXPECT_TRUE(with.scales == without.scales) << "scales differ with column sums";
  EXPECT_TRUE(with.qt == without.qt) << "qt differs with column sums";
  EXPECT_TRUE(with.scales_t == without.scales_t) << "scales_t differ with column sums";
  EXPECT_EQ(without.sums, std::vector<unsigned char>(without.sums.size(), kPoison))
      << "sums written without asking";
}

struct Case {
  Granularity granularity;
  DType input;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  std::string g(to_string(info.param.granularity));
  for (char& ch : g)
    if (ch == 'x') ch = '_';
  return std::string(to_string(info.param.input)) + "_g" + g;
}

std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (DType in : {DType::bf16, DType::fp16, DType::fp32})
    for (Granularity g :
         {Granularity::tensor, Granularity::row, Granularity::group128, Granularity::block128})
      out.push_back({g, in});
  return out;
}

class ColumnSumsGpu : public testing::TestWithParam<Case> {};

// The runtime's kernels on ragged shapes: 300 x 200 (both cut), rows cut inside a 16-row slab
// and odd leading dimensions (the element-wise path), one row, a tall tensor of many row tiles.
TEST_P(ColumnSumsGpu, MatchesHostReferenceAndLeavesTheCastAlone) {
  FP8JIT_REQUIRE_GPU();
  const Case c = GetParam();
  const std::vector<Shape> shapes = {
      {300, 200, 0}, {300, 200, 3}, {1, 16, 0}, {129, 1000, 8}, {4100, 264, 0}};
  unsigned seed = 101;
  for (const Shape& s : shapes)
    for (bool edge : {false, true}) {
      SCOPED_TRACE(testing::Message()
                   << "m=" << s.m << " k=" << s.k << " pad=" << s.pad << " edge=" << edge);
      const auto xh = random_tensor(s.m, s.k + s.pad, s.k, c.input, seed++, edge);
      const Outputs with = run_gpu(c.granularity, c.input, s, xh, true);
      const Outputs without = run_gpu(c.granularity, c.input, s, xh, false);
      expect_same_casts(with, without);
      expect_sums(with.sums, reference_sums(c.granularity, c.input, s, xh));
    }
}

// Every config (vec x threads: the staged-bytes, register and float-tile paths, 2 to 64 rows a
// pass) gives the same sums: the order does not depend on how the tile is split among threads.
TEST_P(ColumnSumsGpu, EveryConfigSumsInTheSameOrder) {
  FP8JIT_REQUIRE_GPU();
  const Case c = GetParam();
  const Shape s{300, 208, 0};  // rows of 16-element multiples: every vec is allowed
  const auto xh = random_tensor(s.m, s.k, s.k, c.input, 7, false);
  const std::vector<float> want = reference_sums(c.granularity, c.input, s, xh);
  const Outputs without = run_gpu(c.granularity, c.input, s, xh, false);
  QuantizeProblem p;
  p.input = c.input;
  p.granularity = c.granularity;
  p.transpose = true;
  p.column_sums = true;
  for (int vec : {4, 8, 16})
    for (int threads : {64, 128, 256, 512}) {
      const KernelSpec spec =
          make_quantize_spec(p, {vec, threads, c.granularity == Granularity::tensor ? 2 : 1});
      SCOPED_TRACE(spec_name(spec));
      const Outputs with = run_gpu(c.granularity, c.input, s, xh, true, &spec);
      expect_same_casts(with, without);
      expect_sums(with.sums, want);
    }
}

INSTANTIATE_TEST_SUITE_P(All, ColumnSumsGpu, testing::ValuesIn(all_cases()), case_name);

// The partial sums live in the stream's workspace, which GEMMs' split-K sums share: a larger call
// after a smaller one (the workspace grows) and a smaller one after it still match the reference.
TEST(ColumnSumsGpuWorkspace, GrowsAndIsReused) {
  FP8JIT_REQUIRE_GPU();
  unsigned seed = 3;
  for (const Shape& s : {Shape{128, 128, 0}, Shape{8192, 1024, 0}, Shape{200, 300, 0}}) {
    SCOPED_TRACE(testing::Message() << "m=" << s.m << " k=" << s.k);
    const auto xh = random_tensor(s.m, s.k, s.k, DType::bf16, seed++, false);
    const Outputs with = run_gpu(Granularity::group128, DType::bf16, s, xh, true);
    expect_sums(with.sums, reference_sums(Granularity::group128, DType::bf16, s, xh));
  }
}

}  // namespace
}  // namespace fp8jit::test
