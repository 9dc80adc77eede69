// GemmArgs checks (runtime/gemm_op): every bad argument is refused by name before any GPU work,
// scale tensors are sized per scale mode and layout, leading dimensions default to dense. Runs on
// a machine without a GPU: the device pointers are fake but aligned, and nothing dereferences them.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "fp8jit/error.hpp"
#include "fp8jit/kernel_spec.hpp"
#include "fp8jit/runtime.hpp"
#include "runtime/jit/driver.hpp"
#include "runtime/ops/gemm.hpp"
#include "runtime/ops/gemm_common.hpp"
#include "tests/common/expect_error.hpp"

namespace fp8jit {
namespace {

using test::error_message;
using test::invalid_message;

template <class T = void>
T* fake(std::uintptr_t address) {
  return reinterpret_cast<T*>(address);
}

// A valid 250 x 302 x 1040 block-scaled problem: K spans 9 blocks of 128 (the last partial), the
// row counts are not multiples of 4 (the col_major_tma padding shows).
GemmArgs valid_args() {
  GemmArgs g;
  g.m = 250;
  g.n = 302;
  g.k = 1040;
  g.a = fake(0x100000);
  g.b = fake(0x200000);
  g.d = fake(0x300000);
  g.scale_a = fake<const float>(0x400000);
  g.scale_b = fake<const float>(0x500000);
  g.scale_mode = ScaleMode::block;
  g.scale_a_layout = ScaleLayout::col_major_tma;
  g.scale_b_layout = ScaleLayout::row_major;
  g.scale_a_size = 9 * 252;  // 1x128 groups of A, rows padded 250 -> 252
  g.scale_b_size = 3 * 9;    // 128x128 blocks of B: 3 x 9
  return g;
}


// normalize(args) must refuse with invalid_argument and a message containing every needle.
void expect_rejected(const GemmArgs& args, const std::vector<std::string>& needles) {
  const std::string msg =
      error_message(ErrorKind::invalid_argument, [&] { (void)ops::normalize(args); });
  for (const auto& n : needles)
    EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
}

void expect_accepted(const GemmArgs& args) {
  try {
    (void)ops::normalize(args);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "rejected: " << e.what();
  }
}

template <class F>
GemmArgs edit(F&& f) {
  GemmArgs g = valid_args();
  f(g);
  return g;
}

TEST(GemmArgsValid, AcceptedAndLeadingDimensionsDefaultToDense) {
  const GemmArgs in = valid_args();
  const GemmArgs out = ops::normalize(in);
  EXPECT_EQ(out.lda, 1040);
  EXPECT_EQ(out.ldb, 1040);
  EXPECT_EQ(out.ldd, 302);
  EXPECT_EQ(out.m, in.m);
  EXPECT_EQ(out.n, in.n);
  EXPECT_EQ(out.k, in.k);
  EXPECT_EQ(out.a, in.a);
  EXPECT_EQ(out.scale_b, in.scale_b);
  EXPECT_EQ(out.scale_a_size, in.scale_a_size);
  // Explicit leading dimensions are kept.
  const GemmArgs strided = ops::normalize(edit([](GemmArgs& g) {
    g.lda = 2048;
    g.ldb = 1056;
    g.ldd = 303;
  }));
  EXPECT_EQ(strided.lda, 2048);
  EXPECT_EQ(strided.ldb, 1056);
  EXPECT_EQ(strided.ldd, 303);
  // The problem the arguments ask for.
  const GemmProblem p = ops::problem_of(edit([](GemmArgs& g) {
    g.bias = fake(0x600000);
    g.d_dtype = DType::fp16;
    g.a_format = Fp8Format::e5m2;
  }));
  EXPECT_TRUE(p.bias);
  EXPECT_EQ(p.out, DType::fp16);
  EXPECT_EQ(p.a_format, Fp8Format::e5m2);
  EXPECT_EQ(p.b_format, Fp8Format::e4m3);
  EXPECT_EQ(p.scale, ScaleMode::block);
  EXPECT_FALSE(ops::problem_of(valid_args()).bias);
}

TEST(GemmArgsDims, NonPositiveAndHugeSizesRejected) {
  for (std::int64_t v : {0, -1, -1040}) {
    expect_rejected(edit([&](GemmArgs& g) { g.m = v; }),
                    {fmt::format("invalid m = {}", v), "positive"});
    expect_rejected(edit([&](GemmArgs& g) { g.n = v; }),
                    {fmt::format("invalid n = {}", v), "positive"});
    expect_rejected(edit([&](GemmArgs& g) { g.k = v; }),
                    {fmt::format("invalid k = {}", v), "positive"});
  }
  expect_rejected(edit([](GemmArgs& g) { g.m = std::int64_t{INT_MAX} + 1; }), {"m", "2^31-1"});
  expect_rejected(edit([](GemmArgs& g) { g.n = std::int64_t{1} << 40; }), {"n = 1099511627776", "2^31-1"});
}

TEST(GemmArgsDims, KMustBeAMultipleOf16) {
  for (std::int64_t k : {100, 8, 1041, 1048 - 4}) {
    SCOPED_TRACE(k);
    expect_rejected(edit([&](GemmArgs& g) {
                      g.k = k;
                      g.scale_a_size = g.scale_b_size = 1 << 20;
                    }),
                    {fmt::format("invalid k = {}", k), "multiple of 16"});
  }
  // 16 and 1056 (not a multiple of 128: the last K block is partial) are fine.
  for (std::int64_t k : {16, 1056}) {
    SCOPED_TRACE(k);
    expect_accepted(edit([&](GemmArgs& g) {
      g.k = k;
      g.scale_a_size = g.scale_b_size = 1 << 20;
    }));
  }
}

TEST(GemmArgsStrides, LeadingDimensionsChecked) {
  expect_rejected(edit([](GemmArgs& g) { g.lda = 512; }), {"invalid lda = 512", "at least 1040"});
  expect_rejected(edit([](GemmArgs& g) { g.lda = 1039; }), {"invalid lda = 1039", "at least 1040"});
  expect_rejected(edit([](GemmArgs& g) { g.lda = 1048; }),
                  {"invalid lda = 1048", "multiple of 16"});
  expect_rejected(edit([](GemmArgs& g) { g.lda = -16; }), {"invalid lda = -16"});
  expect_rejected(edit([](GemmArgs& g) { g.ldb = 1024; }), {"invalid ldb = 1024", "at least 1040"});
  expect_rejected(edit([](GemmArgs& g) { g.ldb = 1048; }),
                  {"invalid ldb = 1048", "multiple of 16"});
  expect_rejected(edit([](GemmArgs& g) { g.ldd = 301; }), {"invalid ldd = 301", "at least 302"});
  expect_accepted(edit([](GemmArgs& g) { g.lda = g.ldb = 1040 + 16; }));
  expect_accepted(
      edit([](GemmArgs& g) { g.ldd = 305; }));  // D is stored element by element where needed
}

TEST(GemmArgsPointers, NullPointersRejectedByName) {
  expect_rejected(edit([](GemmArgs& g) { g.a = nullptr; }),
                  {"invalid a = nullptr", "device pointer"});
  expect_rejected(edit([](GemmArgs& g) { g.b = nullptr; }), {"invalid b = nullptr"});
  expect_rejected(edit([](GemmArgs& g) { g.d = nullptr; }), {"invalid d = nullptr"});
  expect_rejected(edit([](GemmArgs& g) { g.scale_a = nullptr; }), {"invalid scale_a = nullptr"});
  expect_rejected(edit([](GemmArgs& g) { g.scale_b = nullptr; }), {"invalid scale_b = nullptr"});
  // Tensor scaling still reads one scale per operand.
  expect_rejected(edit([](GemmArgs& g) {
                    g.scale_mode = ScaleMode::tensor;
                    g.scale_a = nullptr;
                  }),
                  {"invalid scale_a = nullptr"});
  expect_accepted(edit([](GemmArgs& g) { g.bias = nullptr; }));  // bias is optional
}

TEST(GemmArgsPointers, MisalignedPointersRejected) {
  // TMA needs 16-byte aligned operands.
  expect_rejected(edit([](GemmArgs& g) { g.a = fake(0x100008); }),
                  {"invalid a = 0x100008", "16-byte aligned"});
  expect_rejected(edit([](GemmArgs& g) { g.b = fake(0x200008); }),
                  {"invalid b = 0x200008", "16-byte aligned"});
  expect_rejected(edit([](GemmArgs& g) { g.a = fake(0x100001); }), {"invalid a"});
  // D and bias: their element size.
  expect_rejected(edit([](GemmArgs& g) { g.d = fake(0x300001); }),
                  {"invalid d = 0x300001", "2-byte aligned"});
  expect_accepted(edit([](GemmArgs& g) { g.d = fake(0x300002); }));
  expect_rejected(edit([](GemmArgs& g) {
                    g.d_dtype = DType::fp32;
                    g.d = fake(0x300002);
                  }),
                  {"invalid d", "4-byte aligned"});
  expect_rejected(edit([](GemmArgs& g) { g.bias = fake(0x600001); }),
                  {"invalid bias", "2-byte aligned"});
  expect_accepted(edit([](GemmArgs& g) { g.bias = fake(0x600002); }));
  // Scales are fp32.
  expect_rejected(edit([](GemmArgs& g) { g.scale_a = fake<const float>(0x400002); }),
                  {"invalid scale_a", "4-byte aligned"});
  expect_rejected(edit([](GemmArgs& g) { g.scale_b = fake<const float>(0x500001); }),
                  {"invalid scale_b", "4-byte aligned"});
}

TEST(GemmArgsFormats, FastAccumulationOnlyWithTensorOrRowwiseScaling) {
  for (ScaleMode mode : {ScaleMode::block, ScaleMode::group}) {
    SCOPED_TRACE(to_string(mode));
    expect_rejected(edit([&](GemmArgs& g) {
                      g.scale_mode = mode;
                      g.scale_b_size = 1 << 20;
                      g.fast_accum = true;
                    }),
                    {"invalid fast_accum = true", "tensor and rowwise"});
  }
  for (ScaleMode mode : {ScaleMode::tensor, ScaleMode::rowwise}) {
    SCOPED_TRACE(to_string(mode));
    const GemmArgs g = edit([&](GemmArgs& g) {
      g.scale_mode = mode;
      g.scale_a_size = g.scale_b_size = 1 << 20;
      g.fast_accum = true;
    });
    expect_accepted(g);
    EXPECT_TRUE(ops::problem_of(g).fast_accum);
  }
  EXPECT_FALSE(ops::problem_of(valid_args()).fast_accum);
}

TEST(GemmArgsFormats, BothOperandsE5m2Rejected) {
  expect_rejected(edit([](GemmArgs& g) { g.a_format = g.b_format = Fp8Format::e5m2; }),
                  {"a_format/b_format", "e5m2/e5m2", "E4M3"});
  expect_accepted(edit([](GemmArgs& g) { g.a_format = Fp8Format::e5m2; }));
  expect_accepted(edit([](GemmArgs& g) { g.b_format = Fp8Format::e5m2; }));
}

// Scale tensor sizes: exactly the minimum is accepted, one float less is refused, per mode and
// layout. The minimum is computed here by hand and must agree with scale_count().
TEST(GemmArgsScales, SizesCheckedForEveryModeAndLayout) {
  struct Case {
    ScaleMode mode;
    ScaleLayout la, lb;
    std::int64_t need_a, need_b;
  };
  // m = 250, n = 302, k = 1040: 9 K blocks; col_major_tma pads rows to 252 (A), 304 (B 1x128),
  // 4 (B's 3 row blocks).
  const std::vector<Case> cases = {
      {ScaleMode::tensor, ScaleLayout::col_major_tma, ScaleLayout::row_major, 1, 1},
      {ScaleMode::tensor, ScaleLayout::row_major, ScaleLayout::col_major_tma, 1, 1},
      {ScaleMode::rowwise, ScaleLayout::col_major_tma, ScaleLayout::row_major, 250, 302},
      {ScaleMode::rowwise, ScaleLayout::row_major, ScaleLayout::col_major_tma, 250, 302},
      {ScaleMode::block, ScaleLayout::col_major_tma, ScaleLayout::row_major, 9 * 252, 3 * 9},
      {ScaleMode::block, ScaleLayout::row_major, ScaleLayout::col_major_tma, 250 * 9, 9 * 4},
      {ScaleMode::group, ScaleLayout::col_major_tma, ScaleLayout::row_major, 9 * 252, 302 * 9},
      {ScaleMode::group, ScaleLayout::row_major, ScaleLayout::col_major_tma, 250 * 9, 9 * 304},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(
        fmt::format("{} scaling, A {}, B {}", to_string(c.mode), to_string(c.la), to_string(c.lb)));
    // The documented sizes (runtime.hpp) agree with the hand-computed ones.
    if (c.mode == ScaleMode::block || c.mode == ScaleMode::group) {
      EXPECT_EQ(scale_count(Granularity::group128, c.la, 250, 1040), c.need_a);
      EXPECT_EQ(
          scale_count(c.mode == ScaleMode::block ? Granularity::block128 : Granularity::group128,
                      c.lb, 302, 1040),
          c.need_b);
    }
    auto args = [&](std::int64_t size_a, std::int64_t size_b) {
      GemmArgs g = valid_args();
      g.scale_mode = c.mode;
      g.scale_a_layout = c.la;
      g.scale_b_layout = c.lb;
      g.scale_a_size = size_a;
      g.scale_b_size = size_b;
      return g;
    };
    expect_accepted(args(c.need_a, c.need_b));
    expect_accepted(args(c.need_a + 1, c.need_b + 100));
    expect_rejected(args(c.need_a - 1, c.need_b),
                    {fmt::format("invalid scale_a_size = {}", c.need_a - 1),
                     fmt::format("needs {} floats", c.need_a), std::string(to_string(c.mode))});
    expect_rejected(args(c.need_a, c.need_b - 1),
                    {fmt::format("invalid scale_b_size = {}", c.need_b - 1),
                     fmt::format("needs {} floats", c.need_b)});
    expect_rejected(args(0, c.need_b), {"invalid scale_a_size = 0"});
    expect_rejected(args(c.need_a, -1), {"invalid scale_b_size = -1"});
  }
}

TEST(GemmArgsSpec, MismatchedSpecRejected) {
  const GemmArgs a = ops::normalize(valid_args());
  const KernelSpec ok = make_gemm_spec(ops::problem_of(a), {128, 128, 4, 8});
  EXPECT_NO_THROW(ops::check_matches(ok, a));
  // Clusters are configs, not problems: a 2-CTA kernel along either axis serves the same arguments.
  EXPECT_NO_THROW(ops::check_matches(make_gemm_spec(ops::problem_of(a), {128, 128, 4, 8, 2, 1}), a));
  EXPECT_NO_THROW(ops::check_matches(make_gemm_spec(ops::problem_of(a), {128, 128, 4, 8, 1, 2}), a));
  const std::vector<GemmProblem> wrong = {
      {Fp8Format::e5m2, Fp8Format::e4m3, DType::bf16, ScaleMode::block, false},
      {Fp8Format::e4m3, Fp8Format::e5m2, DType::bf16, ScaleMode::block, false},
      {Fp8Format::e4m3, Fp8Format::e4m3, DType::fp32, ScaleMode::block, false},
      {Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::group, false},
      {Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block, true},
  };
  // Fast and precise accumulation are different kernels.
  {
    GemmArgs t = valid_args();
    t.scale_mode = ScaleMode::tensor;
    const KernelSpec precise = make_gemm_spec(ops::problem_of(t), {128, 128, 4, 8});
    t.fast_accum = true;
    const std::string msg =
        error_message(ErrorKind::invalid_argument, [&] { ops::check_matches(precise, t); });
    EXPECT_NE(msg.find("invalid spec = " + spec_name(precise)), std::string::npos) << msg;
    // The widest fast-accumulation tile (240 columns: 256 spills).
    EXPECT_NO_THROW(ops::check_matches(make_gemm_spec(ops::problem_of(t), {128, 240, 3, 8}), t));
  }
  for (const GemmProblem& p : wrong) {
    const KernelSpec s = make_gemm_spec(p, {128, 128, 4, 8});
    const std::string msg =
        error_message(ErrorKind::invalid_argument, [&] { ops::check_matches(s, a); });
    EXPECT_NE(msg.find("invalid spec = " + spec_name(s)), std::string::npos) << msg;
  }
  error_message(ErrorKind::invalid_argument,
                [&] { ops::check_matches(make_quantize_spec({}, {}), a); });
}

// A loaded gemm kernel as the split-K decisions see it: its config and how many clusters of each
// size the GPU could hold (no GPU needed).
LoadedKernel split_kernel(GemmConfig c, int resident_clusters) {
  LoadedKernel k;
  k.gemm_config = c;
  for (int s = 2; s < static_cast<int>(k.split_clusters.size()); ++s) k.split_clusters[s] = resident_clusters / s;
  return k;
}

TEST(GemmArgsSplitK, WorkspaceHoldsOneFp32PartialOfDPerSplitSummedOutsideClusters) {
  const GemmArgs a = ops::normalize(valid_args());
  const LoadedKernel k = split_kernel({128, 128, 4, 8}, 0);  // no cluster fits: the workspace
  EXPECT_EQ(ops::workspace_bytes(k, a, 1), 0u);  // no split: D is written directly
  EXPECT_EQ(ops::workspace_bytes(k, a, 2), 2u * 250 * 302 * 4);
  EXPECT_EQ(ops::workspace_bytes(k, a, 16), 16u * 250 * 302 * 4);
  // Dense partials whatever D's leading dimension and type.
  GemmArgs wide = a;
  wide.ldd = 4096;
  wide.d_dtype = DType::fp32;
  EXPECT_EQ(ops::workspace_bytes(k, wide, 3), 3u * 250 * 302 * 4);
}

TEST(GemmArgsSplitK, SplitsSumInClustersWhenEveryTileFitsAndTheStagesHoldAPartial) {
  const GemmArgs a = ops::normalize(valid_args());  // 250 x 302: 2 x 3 tiles of 128 x 128
  const LoadedKernel k = split_kernel({128, 128, 4, 8}, 132);
  EXPECT_TRUE(ops::splits_in_cluster(k, a, 2));
  EXPECT_TRUE(ops::splits_in_cluster(k, a, 8));
  EXPECT_EQ(ops::workspace_bytes(k, a, 2), 0u);
  EXPECT_FALSE(ops::splits_in_cluster(k, a, 1));
  EXPECT_FALSE(ops::splits_in_cluster(k, a, 9));  // clusters of at most 8 CTAs
  // Fewer resident clusters than tiles: the workspace.
  const LoadedKernel few = split_kernel({128, 128, 4, 8}, 12);  // 6 clusters of 2, 3 of 4
  EXPECT_TRUE(ops::splits_in_cluster(few, a, 2));
  EXPECT_FALSE(ops::splits_in_cluster(few, a, 4));
  EXPECT_EQ(ops::workspace_bytes(few, a, 4), 4u * 250 * 302 * 4);
  // Two stages of 128 x 256 hold 96 KiB; an FP32 128 x 256 tile needs 128 KiB.
  EXPECT_FALSE(ops::splits_in_cluster(split_kernel({128, 256, 2, 8}, 132), a, 2));
  EXPECT_TRUE(ops::splits_in_cluster(split_kernel({128, 256, 3, 8}, 132), a, 2));
  // A config cluster (multicast) and a split cluster do not combine.
  EXPECT_FALSE(ops::splits_in_cluster(split_kernel({128, 128, 4, 8, 1, 2}, 132), a, 2));
}

// An SM budget (GemmArgs::max_sms) bounds the persistent grid: one CTA per SM, or the resident
// clusters that fit in it (at least one), and a split summed in clusters must fit in it whole.
TEST(GemmArgsSmBudget, GridAndClusterSplitsStayWithinTheBudget) {
  EXPECT_EQ(ops::resident_units(0, 1, 132), 132);
  EXPECT_EQ(ops::resident_units(0, 1, 100), 100);
  EXPECT_EQ(ops::resident_units(66, 2, 132), 66);  // 2-CTA clusters: 66 resident on the GPU
  EXPECT_EQ(ops::resident_units(66, 2, 100), 50);  // 50 clusters = 100 SMs
  EXPECT_EQ(ops::resident_units(66, 2, 1), 1);     // a cluster kernel takes one cluster at least
  const GemmArgs a = ops::normalize(valid_args());  // 2 x 3 tiles of 128 x 128
  const LoadedKernel k = split_kernel({128, 128, 4, 8}, 132);
  EXPECT_TRUE(ops::splits_in_cluster(k, a, 8, SplitSum::cluster, 48));   // 6 tiles x 8 = 48 SMs
  EXPECT_FALSE(ops::splits_in_cluster(k, a, 8, SplitSum::cluster, 47));  // one short
  EXPECT_EQ(ops::workspace_bytes(k, a, 8, SplitSum::cluster, 47), 8u * 250 * 302 * 4);
  GemmArgs decode = valid_args();
  decode.m = 64;
  decode.n = 2112;
  decode.k = 7168;
  const GemmConfig c{64, 64, 6, 8};  // 33 tiles
  // On 100 SMs the heuristic asks for at least 3 ranges; clusters of 3 fit (99 SMs), of 4 do not
  // (132 > 100) although the GPU would hold them: 3 ranges summed in clusters.
  ASSERT_GE(gemm_split_k(decode.m, decode.n, decode.k, c, 100), 3);
  const LoadedKernel k132 = split_kernel(c, 132);
  EXPECT_EQ(ops::split_count(k132, decode, 100), 3);
  EXPECT_TRUE(ops::splits_in_cluster(k132, decode, 3, SplitSum::cluster, 100));
  EXPECT_FALSE(ops::splits_in_cluster(k132, decode, 4, SplitSum::cluster, 100));
  EXPECT_TRUE(ops::splits_in_cluster(k132, decode, 4, SplitSum::cluster, 132));
}

TEST(GemmArgsSmBudget, ANegativeBudgetIsRefusedBeforeAnythingElse) {
  GemmArgs a = valid_args();
  a.max_sms = -1;
  EXPECT_NE(invalid_message([&] { ops::normalize(a); }).find("invalid max_sms = -1"), std::string::npos);
  a.max_sms = 0;
  EXPECT_NO_THROW(ops::normalize(a));
  a.max_sms = 100000;  // more than the GPU has: all of them
  EXPECT_NO_THROW(ops::normalize(a));
  RuntimeOptions o;
  o.max_sms = -3;
  EXPECT_NE(invalid_message([&] { Runtime rt(o); }).find("invalid max_sms = -3"), std::string::npos);
}

TEST(GemmArgsSplitK, SplitCountFallsBackToTheLargestCountWhoseClustersFit) {
  GemmArgs a = valid_args();
  a.m = 64;
  a.n = 2112;
  a.k = 7168;  // only the shape matters here
  const GemmConfig c{64, 64, 6, 8};  // 33 tiles: the heuristic asks for 4 splits on 132 SMs
  ASSERT_EQ(gemm_split_k(a.m, a.n, a.k, c, 132), 4);
  EXPECT_EQ(ops::split_count(split_kernel(c, 132), a, 132), 4);  // 33 clusters of 4 fit
  LoadedKernel k = split_kernel(c, 132);
  k.split_clusters[4] = 32;  // one short: 3 ranges instead, still one wave
  EXPECT_EQ(ops::split_count(k, a, 132), 3);
  EXPECT_TRUE(ops::splits_in_cluster(k, a, 3));
  EXPECT_EQ(ops::split_count(split_kernel(c, 0), a, 132), 4);  // none fits: the workspace
}

// ---- through the Runtime, without a GPU ------------------------------------------------------

TEST(GemmArgsRuntime, WithoutADriverGemmThrowsDriverErrorNamingLibcuda) {
  if (driver::available()) GTEST_SKIP() << "a CUDA device is available";
  Runtime rt{RuntimeOptions{}};
  const GemmArgs a = valid_args();
  const std::string msg = error_message(ErrorKind::driver, [&] { rt.gemm(a, nullptr); });
  if (driver::try_api() == nullptr) EXPECT_NE(msg.find("libcuda"), std::string::npos) << msg;
  // With an explicit, matching spec too.
  const KernelSpec spec = make_gemm_spec(ops::problem_of(a), {128, 128, 4, 8});
  const std::string msg2 = error_message(ErrorKind::driver, [&] { rt.gemm(a, spec, nullptr); });
  if (driver::try_api() == nullptr) EXPECT_NE(msg2.find("libcuda"), std::string::npos) << msg2;
  // Bad arguments are reported as such before the driver is touched.
  const std::string bad = error_message(
      ErrorKind::invalid_argument, [&] { rt.gemm(edit([](GemmArgs& g) { g.k = 100; }), nullptr); });
  EXPECT_NE(bad.find("invalid k = 100"), std::string::npos) << bad;
  const KernelSpec other = make_gemm_spec({Fp8Format::e4m3, Fp8Format::e4m3, DType::fp16}, {});
  const std::string mismatch =
      error_message(ErrorKind::invalid_argument, [&] { rt.gemm(a, other, nullptr); });
  EXPECT_NE(mismatch.find("invalid spec"), std::string::npos) << mismatch;
  EXPECT_EQ(rt.cache_stats().compiles, 0u);  // nothing was compiled for a launch that cannot happen
}

TEST(GemmArgsRuntime, SelectWithoutAGpuUsesTheH100Defaults) {
  if (driver::available()) GTEST_SKIP() << "a CUDA device is available";
  Runtime rt{RuntimeOptions{}};
  for (std::int64_t m : {64, 4096}) {
    GemmArgs a = valid_args();
    a.m = m;
    a.scale_a_size = scale_count(Granularity::group128, a.scale_a_layout, m, a.k);
    EXPECT_EQ(rt.select(a), default_gemm_spec(ops::problem_of(a), a.m, a.n, a.k, 132, 232448));
  }
  error_message(ErrorKind::invalid_argument,
                [&] { (void)rt.select(edit([](GemmArgs& g) { g.scale_b = nullptr; })); });
}

// TuneOptions::more_group_rows are for grouped gemms: a dense tune with tables is refused naming
// them, before the device is looked at (so the same on a machine with a GPU and without).
TEST(GemmArgsRuntime, DenseTuneRefusesGroupTables) {
  Runtime rt{RuntimeOptions{}};
  const int table = 0;
  TuneOptions o;
  o.more_group_rows = {&table};
  const std::string msg = invalid_message([&] { rt.tune(valid_args(), o); });
  EXPECT_NE(msg.find("more_group_rows"), std::string::npos) << msg;
}

// select(problem, shape) and select_grouped(...) answer without operands, as select(args) does,
// and refuse what no GEMM could run with.
TEST(GemmArgsRuntime, SelectWithoutOperandsMatchesSelectWithThem) {
  if (driver::available()) GTEST_SKIP() << "a CUDA device is available";
  Runtime rt{RuntimeOptions{}};
  const GemmArgs a = valid_args();
  EXPECT_EQ(rt.select(ops::problem_of(a), GemmShape{a.m, a.n, a.k}), rt.select(a));
  GemmProblem grouped = ops::problem_of(a);
  grouped.layout = GemmLayout::masked;
  EXPECT_EQ(rt.select_grouped(grouped, 32, 64, 4096, 7168),
            default_grouped_gemm_spec(grouped, 32, 64, 4096, 7168));
  auto refused = [&](auto call, const char* needle) {
    const std::string msg = error_message(ErrorKind::invalid_argument, call);
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  };
  refused([&] { (void)rt.select(ops::problem_of(a), GemmShape{0, 16, 16}); }, "m = 0");
  refused([&] { (void)rt.select(grouped, GemmShape{16, 16, 16}); }, "layout");
  refused([&] { (void)rt.select_grouped(ops::problem_of(a), 4, 16, 256, 256); }, "layout");
  refused([&] { (void)rt.select_grouped(grouped, 0, 16, 256, 256); }, "groups");
  refused([&] { (void)rt.select_grouped(grouped, std::int64_t{1} << 40, 16, 256, 256); }, "groups");
  refused([&] { (void)rt.select_grouped(grouped, 1 << 20, 16, 1 << 12, 256); }, "groups*n");
  refused([&] { (void)rt.select(ops::problem_of(a), GemmShape{std::int64_t{1} << 40, 16, 16}); }, "2^31-1");
  refused([&] { (void)rt.select_grouped(grouped, 4, 0, 256, 256); }, "expected_m");
  refused([&] { (void)rt.select_grouped(grouped, 4, 16, 256, 100); }, "k = 100");
  GemmProblem group_scaled = grouped;
  group_scaled.scale = ScaleMode::group;
  refused([&] { (void)rt.select_grouped(group_scaled, 4, 16, 256, 256); }, "scale");
}

// The scale granularity of each mode, and the sizes GemmArgs asks for in it.
TEST(GemmScaleGranularity, EachModesOperands) {
  EXPECT_EQ(gemm_scale_granularity_a(ScaleMode::tensor), Granularity::tensor);
  EXPECT_EQ(gemm_scale_granularity_b(ScaleMode::tensor), Granularity::tensor);
  EXPECT_EQ(gemm_scale_granularity_a(ScaleMode::rowwise), Granularity::row);
  EXPECT_EQ(gemm_scale_granularity_b(ScaleMode::rowwise), Granularity::row);
  EXPECT_EQ(gemm_scale_granularity_a(ScaleMode::block), Granularity::group128);
  EXPECT_EQ(gemm_scale_granularity_b(ScaleMode::block), Granularity::block128);
  EXPECT_EQ(gemm_scale_granularity_a(ScaleMode::group), Granularity::group128);
  EXPECT_EQ(gemm_scale_granularity_b(ScaleMode::group), Granularity::group128);
  // B [300, 1000] under block scaling: 3 x 8 blocks of 128x128.
  EXPECT_EQ(scale_count(gemm_scale_granularity_b(ScaleMode::block), ScaleLayout::row_major, 300, 1000), 24);
}

}  // namespace
}  // namespace fp8jit
