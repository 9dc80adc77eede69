// GroupedGemmArgs checks (runtime/ops/grouped_gemm): every bad argument is refused by name before
// any GPU work, through the C++ API and the C ABI; scale tensors are sized per group. Runs without
// a GPU: the device pointers are fake but aligned, and nothing dereferences them.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <climits>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "autotune/grouped_reference.hpp"
#include "fp8jit/fp8jit.h"
#include "fp8jit/kernel_spec.hpp"
#include "fp8jit/runtime.hpp"
#include "generator/gemm_cost.hpp"
#include "runtime/jit/driver.hpp"
#include "runtime/ops/grouped_gemm.hpp"
#include "tests/common/expect_error.hpp"

namespace fp8jit {
namespace {

template <class T = void>
T* fake(std::uintptr_t address) {
  return reinterpret_cast<T*>(address);
}

// 8 experts of 4096 x 7168 (DeepSeek-V3's gate-up), 1000 routed rows, block scaling.
GroupedGemmArgs valid_contiguous() {
  GroupedGemmArgs g;
  g.layout = GemmLayout::contiguous;
  g.groups = 8;
  g.group_rows = fake<const int>(0x700000);
  g.m = 1000;
  g.n = 4096;
  g.k = 7168;
  g.a = fake(0x100000);
  g.b = fake(0x200000);
  g.d = fake(0x300000);
  g.scale_a = fake<const float>(0x400000);
  g.scale_b = fake<const float>(0x500000);
  g.scale_a_size = 56 * 1000;     // 1x128 groups of A's 1000 rows (col_major_tma: 1000 is a multiple of 4)
  g.scale_b_size = 8 * 32 * 56;   // 128x128 blocks of each expert's B
  return g;
}

GroupedGemmArgs valid_masked() {
  GroupedGemmArgs g = valid_contiguous();
  g.layout = GemmLayout::masked;
  g.m = 256;                      // M_max per group
  g.scale_a_size = 56 * 8 * 256;  // A [8 * 256, 7168]
  return g;
}

// valid_masked() through the C ABI's struct (its other fields the C++ defaults).
fp8jit_grouped_gemm_args masked_c_args() {
  const GroupedGemmArgs v = valid_masked();
  fp8jit_grouped_gemm_args c;
  fp8jit_grouped_gemm_args_init(&c);
  c.layout = FP8JIT_LAYOUT_MASKED;
  c.groups = v.groups;
  c.group_rows = v.group_rows;
  c.a = v.a, c.b = v.b, c.d = v.d;
  c.m = v.m, c.n = v.n, c.k = v.k;
  c.scale_a = v.scale_a, c.scale_a_size = v.scale_a_size;
  c.scale_b = v.scale_b, c.scale_b_size = v.scale_b_size;
  return c;
}

void expect_rejected(const GroupedGemmArgs& args, const std::vector<std::string>& needles) {
  const std::string msg = test::invalid_message([&] { (void)ops::normalize(args); });
  for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
}

TEST(GroupedGemmArgs, ValidLayoutsAcceptedWithDefaults) {
  const GroupedGemmArgs c = ops::normalize(valid_contiguous());
  EXPECT_EQ(c.expected_m, 125);  // m / groups
  EXPECT_EQ(c.lda, 7168);
  EXPECT_EQ(c.ldd, 4096);
  const GroupedGemmArgs m = ops::normalize(valid_masked());
  EXPECT_EQ(m.expected_m, 256);  // M_max
  EXPECT_EQ(ops::total_rows(m), 2048);
  GroupedGemmArgs indexed = valid_contiguous();
  indexed.layout = GemmLayout::indexed;  // m_indices: one int32 per row of A
  const GroupedGemmArgs i = ops::normalize(indexed);
  EXPECT_EQ(i.expected_m, 125);
  EXPECT_EQ(ops::total_rows(i), 1000);
}

TEST(GroupedGemmArgs, BadGroupsAndTablesRejectedByName) {
  auto with = [](auto change) {
    GroupedGemmArgs g = valid_contiguous();
    change(g);
    return g;
  };
  expect_rejected(with([](auto& g) { g.groups = 0; }), {"groups = 0", "[1, 2^31-1]"});
  expect_rejected(with([](auto& g) { g.groups = -3; }), {"groups = -3"});
  expect_rejected(with([](auto& g) { g.groups = std::int64_t{1} << 40; }), {"groups"});
  expect_rejected(with([](auto& g) { g.group_rows = nullptr; }), {"group_rows (offsets) = nullptr"});
  expect_rejected(with([](auto& g) { g.group_rows = fake<const int>(0x700002); }), {"group_rows", "4-byte aligned"});
  expect_rejected(with([](auto& g) { g.status = fake<int>(0x700001); }), {"status", "4-byte aligned"});
  expect_rejected(with([](auto& g) { g.layout = GemmLayout::dense; }), {"layout = dense", "gemm()"});
  expect_rejected(with([](auto& g) { g.expected_m = -1; }), {"expected_m = -1"});
  expect_rejected(with([](auto& g) { g.expected_m = 1001; }), {"expected_m = 1001", "[0, 1000]"});
  expect_rejected(with([](auto& g) { g.groups = 600000; g.scale_b_size = INT64_MAX; }), {"groups*n", "2^31"});
  GroupedGemmArgs masked = valid_masked();
  masked.group_rows = nullptr;
  expect_rejected(masked, {"group_rows (masked_m) = nullptr"});
  GroupedGemmArgs indexed = valid_contiguous();
  indexed.layout = GemmLayout::indexed;
  indexed.group_rows = nullptr;
  expect_rejected(indexed, {"group_rows (m_indices) = nullptr"});
  indexed.group_rows = fake<const int>(0x700006);
  expect_rejected(indexed, {"group_rows", "4-byte aligned"});
  indexed.group_rows = fake<const int>(0x700000);
  indexed.layout = static_cast<GemmLayout>(4);
  EXPECT_THROW((void)ops::normalize(indexed), Error);
  masked = valid_masked();
  masked.groups = 100'000;  // B [1.6M, k] fits; A [3G, k] does not
  masked.n = 16;
  masked.m = 30'000;
  masked.scale_b_size = masked.scale_a_size = INT64_MAX;
  expect_rejected(masked, {"groups*m"});
}

TEST(GroupedGemmArgs, OperandsAndScalesRejectedByName) {
  auto with = [](auto change) {
    GroupedGemmArgs g = valid_contiguous();
    change(g);
    return g;
  };
  expect_rejected(with([](auto& g) { g.a = nullptr; }), {"a = nullptr"});
  expect_rejected(with([](auto& g) { g.b = fake(0x200008); }), {"invalid b", "16-byte aligned"});
  expect_rejected(with([](auto& g) { g.d = nullptr; }), {"d = nullptr"});
  expect_rejected(with([](auto& g) { g.k = 100; }), {"k = 100"});
  expect_rejected(with([](auto& g) { g.m = 0; }), {"m = 0"});
  expect_rejected(with([](auto& g) { g.scale_mode = ScaleMode::group; }), {"scale_mode = group"});
  expect_rejected(with([](auto& g) { g.fast_accum = true; }), {"fast_accum"});
  expect_rejected(with([](auto& g) { g.scale_a_size -= 1; }), {"scale_a_size = 55999", "needs 56000 floats"});
  expect_rejected(with([](auto& g) { g.scale_b_size -= 1; }), {"scale_b_size = 14335", "8 B [4096x7168]", "14336"});
  // Per tensor: one scale for A, one per expert for B; rowwise: a row of A each, n per expert.
  GroupedGemmArgs t = valid_contiguous();
  t.scale_mode = ScaleMode::tensor;
  t.scale_a_size = 1;
  t.scale_b_size = 7;
  expect_rejected(t, {"scale_b_size = 7", "needs 8 floats"});
  t.scale_mode = ScaleMode::rowwise;
  t.scale_a_size = 1000;
  t.scale_b_size = 8 * 4096;
  (void)ops::normalize(t);
  t.scale_a_size = 999;
  expect_rejected(t, {"scale_a_size = 999", "needs 1000 floats"});
}

TEST(GroupedGemmArgs, CAbiRefusesWithStatusAndMessage) {
  fp8jit_runtime* rt = nullptr;
  ASSERT_EQ(fp8jit_runtime_create_with_cache_dir(nullptr, &rt), FP8JIT_SUCCESS);
  fp8jit_grouped_gemm_args a;
  fp8jit_grouped_gemm_args_init(&a);
  EXPECT_EQ(a.layout, FP8JIT_LAYOUT_CONTIGUOUS);
  EXPECT_EQ(a.scale_mode, FP8JIT_SCALE_MODE_BLOCK);
  EXPECT_EQ(a.group_rows, nullptr);
  EXPECT_EQ(fp8jit_grouped_gemm(rt, &a, nullptr), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fp8jit_last_error()).find("invalid m = 0"), std::string::npos) << fp8jit_last_error();
  a.layout = static_cast<fp8jit_gemm_layout>(7);
  EXPECT_EQ(fp8jit_grouped_gemm(rt, &a, nullptr), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fp8jit_last_error()).find("layout = 7"), std::string::npos) << fp8jit_last_error();
  EXPECT_EQ(fp8jit_grouped_gemm(rt, nullptr, nullptr), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(fp8jit_grouped_gemm(nullptr, &a, nullptr), FP8JIT_ERROR_INVALID_ARGUMENT);
  // The kernel a valid call would use, without a GPU (the heuristic for an H100/H200).
  fp8jit_grouped_gemm_args c = masked_c_args();
  c.expected_m = 16;
  char name[128];
  ASSERT_EQ(fp8jit_grouped_gemm_select(rt, &c, name, sizeof name), FP8JIT_SUCCESS) << fp8jit_last_error();
  EXPECT_NE(std::string(name).find("_block_masked_64x"), std::string::npos) << name;  // decode: 64-row tiles
  EXPECT_EQ(fp8jit_grouped_gemm_select(rt, &c, name, 8), FP8JIT_ERROR_INVALID_ARGUMENT);
  fp8jit_runtime_destroy(rt);
}

// Tuning through the C ABI: bad arguments are refused by name before any GPU use, as for a call;
// without a GPU a valid call says libcuda is missing.
TEST(GroupedGemmArgs, CAbiTuneRefusesBeforeTheGpu) {
  fp8jit_runtime* rt = nullptr;
  ASSERT_EQ(fp8jit_runtime_create_with_cache_dir(nullptr, &rt), FP8JIT_SUCCESS);
  fp8jit_grouped_gemm_args a;
  fp8jit_grouped_gemm_args_init(&a);
  EXPECT_EQ(fp8jit_grouped_gemm_tune(rt, &a, 4), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fp8jit_last_error()).find("invalid m = 0"), std::string::npos) << fp8jit_last_error();
  a.layout = static_cast<fp8jit_gemm_layout>(7);
  EXPECT_EQ(fp8jit_grouped_gemm_tune(rt, &a, 4), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fp8jit_last_error()).find("layout = 7"), std::string::npos) << fp8jit_last_error();
  EXPECT_EQ(fp8jit_grouped_gemm_tune(rt, nullptr, 4), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fp8jit_last_error()).find("args"), std::string::npos) << fp8jit_last_error();
  EXPECT_EQ(fp8jit_grouped_gemm_tune(nullptr, &a, 4), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fp8jit_last_error()).find("runtime"), std::string::npos) << fp8jit_last_error();
  // More group tables to time on: a count without its array, far too many, or a null one, are
  // refused before the device is looked at; none (a NULL array of 0) is fp8jit_grouped_gemm_tune.
  const fp8jit_grouped_gemm_args ok = masked_c_args();
  EXPECT_EQ(fp8jit_grouped_gemm_tune_on_tables(rt, &ok, 4, nullptr, 1),
            FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fp8jit_last_error()).find("tables = NULL"), std::string::npos)
      << fp8jit_last_error();
  const int* one[1] = {ok.group_rows};
  EXPECT_EQ(fp8jit_grouped_gemm_tune_on_tables(rt, &ok, 4, one, 65), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fp8jit_last_error()).find("table_count = 65"), std::string::npos)
      << fp8jit_last_error();
  const int* null_one[1] = {nullptr};
  EXPECT_EQ(fp8jit_grouped_gemm_tune_on_tables(rt, &ok, 4, null_one, 1),
            FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fp8jit_last_error()).find("more_group_rows[0] = nullptr"),
            std::string::npos)
      << fp8jit_last_error();
  std::vector<const int*> many(65, ok.group_rows);  // over the bound the C++ API has as well
  {
    Runtime cpp{RuntimeOptions{}};
    TuneOptions o;
    o.more_group_rows = many;
    const std::string msg = test::invalid_message([&] { cpp.tune(valid_masked(), o); });
    EXPECT_NE(msg.find("more_group_rows = 65 tables"), std::string::npos) << msg;
  }
  fp8jit_grouped_gemm_args bad = masked_c_args();
  bad.m = 0;  // with no tables, the arguments' own error, as fp8jit_grouped_gemm_tune gives it
  EXPECT_EQ(fp8jit_grouped_gemm_tune_on_tables(rt, &bad, 4, nullptr, 0),
            FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fp8jit_last_error()).find("invalid m = 0"), std::string::npos)
      << fp8jit_last_error();
  EXPECT_EQ(fp8jit_grouped_gemm_tune_on_tables(rt, nullptr, 4, one, 1),
            FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fp8jit_last_error()).find("args"), std::string::npos)
      << fp8jit_last_error();

  fp8jit_grouped_gemm_args c = masked_c_args();
  c.expected_m = c.m + 1;  // more rows per group than a group holds
  EXPECT_EQ(fp8jit_grouped_gemm_tune(rt, &c, 4), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fp8jit_last_error()).find("expected_m"), std::string::npos) << fp8jit_last_error();
  c.expected_m = 32;
  c.groups = INT64_MAX;  // huge
  EXPECT_EQ(fp8jit_grouped_gemm_tune(rt, &c, 4), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fp8jit_last_error()).find("groups"), std::string::npos) << fp8jit_last_error();
  c = masked_c_args();
  if (!driver::available()) {  // the operands are not device memory: only without a GPU
    c.expected_m = 32;
    EXPECT_EQ(fp8jit_grouped_gemm_tune(rt, &c, 4), FP8JIT_ERROR_DRIVER);
    EXPECT_NE(std::string(fp8jit_last_error()).find("libcuda"), std::string::npos) << fp8jit_last_error();
  }
  fp8jit_runtime_destroy(rt);
}

// A runtime with a tuning database (fp8jit_runtime_create, FP8JIT_DB): a refused tune writes no
// database file.
TEST(GroupedGemmArgs, CAbiRefusedTuneWritesNoDatabase) {
  std::string dir = ::testing::TempDir() + "fp8jit_grouped_tune_XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const std::string db = dir + "/tuning.sqlite";
  ::setenv("FP8JIT_DB", db.c_str(), 1);
  ::setenv("FP8JIT_CACHE_DIR", dir.c_str(), 1);
  fp8jit_runtime* rt = nullptr;
  const fp8jit_status created = fp8jit_runtime_create(&rt);
  ::unsetenv("FP8JIT_DB");
  ::unsetenv("FP8JIT_CACHE_DIR");
  ASSERT_EQ(created, FP8JIT_SUCCESS) << fp8jit_last_error();
  fp8jit_grouped_gemm_args c = masked_c_args();
  for (std::int64_t bad : {std::int64_t{-1}, std::int64_t{0}, INT64_MAX}) {
    c.n = bad;
    EXPECT_EQ(fp8jit_grouped_gemm_tune(rt, &c, 4), FP8JIT_ERROR_INVALID_ARGUMENT) << "n = " << bad;
    EXPECT_NE(std::string(fp8jit_last_error()).find("invalid n"), std::string::npos) << fp8jit_last_error();
  }
  fp8jit_runtime_destroy(rt);
  EXPECT_FALSE(std::filesystem::exists(db)) << "a refused tune created " << db;
  std::filesystem::remove_all(dir);
}

// A kernel of the other kind is refused by name before the driver: a grouped kernel run as a
// dense GEMM would read a group table that is not there.
TEST(GroupedGemmSpec, LayoutMismatchRefusedBeforeTheDriver) {
  Runtime rt(RuntimeOptions{""});
  GemmProblem grouped;
  grouped.layout = GemmLayout::masked;
  const KernelSpec masked_spec = default_grouped_gemm_spec(grouped, 8, 64, 4096, 7168);
  GemmArgs d;
  d.m = 256;
  d.n = 4096;
  d.k = 7168;
  d.a = fake(0x100000);
  d.b = fake(0x200000);
  d.d = fake(0x300000);
  d.scale_a = fake<const float>(0x400000);
  d.scale_b = fake<const float>(0x500000);
  d.scale_a_size = 56 * 256;
  d.scale_b_size = 32 * 56;
  std::string msg = test::invalid_message([&] { rt.gemm(d, masked_spec, nullptr); });
  EXPECT_NE(msg.find("invalid spec = gemm_sm90_e4m3e4m3_bf16_block_masked_"), std::string::npos) << msg;
  EXPECT_NE(msg.find("layout"), std::string::npos) << msg;
  msg = test::invalid_message([&] { rt.grouped_gemm(valid_contiguous(), masked_spec, nullptr); });
  EXPECT_NE(msg.find("invalid spec = gemm_sm90_e4m3e4m3_bf16_block_masked_"), std::string::npos) << msg;
  msg = test::invalid_message(
      [&] { rt.grouped_gemm(valid_contiguous(), default_gemm_spec({}, 1000, 4096, 7168), nullptr); });
  EXPECT_NE(msg.find("does not match"), std::string::npos) << msg;
  EXPECT_EQ(rt.cache_stats().compiles, 0u);
}

TEST(GroupedGemmSpec, LayoutInNameJsonAndDefaults) {
  GemmProblem p;
  p.layout = GemmLayout::contiguous;
  const KernelSpec s = default_grouped_gemm_spec(p, 8, 512, 4096, 7168);
  EXPECT_EQ(gemm_problem_of(s).layout, GemmLayout::contiguous);
  EXPECT_NE(spec_name(s).find("_block_contiguous_128x"), std::string::npos) << spec_name(s);
  EXPECT_EQ(gemm_config_of(s).cluster_m, 1);
  EXPECT_EQ(spec_from_json(spec_to_json(s)), s);
  // Dense specs keep the JSON (and so the hashes, cache files and tuned rows) they had before
  // layouts existed: "layout" is written only when it is not dense.
  const KernelSpec d = default_gemm_spec({}, 4096, 4096, 7168);
  EXPECT_EQ(spec_to_json(d).find("layout"), std::string::npos) << spec_to_json(d);
  EXPECT_NE(spec_to_json(s).find("\"layout\":\"contiguous\""), std::string::npos);
  EXPECT_THROW(default_grouped_gemm_spec({}, 8, 512, 4096, 7168), Error);  // dense problem
  // 64-row tiles up to 64 expected rows per group, masked groups up to 16 (above, 128 rows);
  // the tuner ranks no taller ones for such groups.
  for (GemmLayout layout : {GemmLayout::contiguous, GemmLayout::masked}) {
    GemmProblem lp;
    lp.layout = layout;
    const std::int64_t most = layout == GemmLayout::masked ? 16 : 64;
    EXPECT_EQ(grouped_short_tile_max_rows(layout), most);
    for (std::int64_t expected : {std::int64_t{1}, most, most + 1, std::int64_t{256}}) {
      const KernelSpec ls = default_grouped_gemm_spec(lp, 32, expected, 7168, 2048);
      EXPECT_EQ(gemm_config_of(ls).block_m, expected <= most ? 64 : 128) << spec_name(ls);
      // Pairs along M only for masked 128x256 tiles
      // (GemmHeuristic.MaskedPairsAlongMOn128x256Tiles).
      const GemmConfig lc = gemm_config_of(ls);
      const bool pair = layout == GemmLayout::masked && lc.block_m == 128 && lc.block_n == 256;
      EXPECT_EQ(lc.cluster_m, pair ? 2 : 1) << spec_name(ls);
    }
  }
  // Indexed layouts: tiles of at most 128 rows, whatever the expected rows per group; wider ones
  // are refused by name.
  GemmProblem ip;
  ip.layout = GemmLayout::indexed;
  for (std::int64_t expected : {1, 64, 128, 512, 4096, 65536}) {
    const KernelSpec is = default_grouped_gemm_spec(ip, 8, expected, 4096, 7168);
    EXPECT_LE(gemm_config_of(is).block_m, kGemmIndexedAlignment) << spec_name(is);
    EXPECT_NE(spec_name(is).find("_indexed_"), std::string::npos) << spec_name(is);
    EXPECT_NO_THROW(validate_spec(is));
  }
  const std::string why = test::invalid_message([&] { validate_spec(make_gemm_spec(ip, GemmConfig{256, 128, 3, 8})); });
  EXPECT_NE(why.find("layout = indexed: block_m = 256"), std::string::npos) << why;
  // Pairs along M: two tile-rows of one group in the contiguous and masked layouts; the indexed
  // layout's grid could pair two groups' tiles, so it names cluster_n instead.
  const GemmConfig pair_m{128, 192, 4, 16, 2, 1};
  for (GemmLayout layout : {GemmLayout::contiguous, GemmLayout::masked}) {
    GemmProblem lp;
    lp.layout = layout;
    const KernelSpec ps = make_gemm_spec(lp, pair_m);
    EXPECT_NO_THROW(validate_spec(ps));
    EXPECT_NE(spec_name(ps).find("_c2m"), std::string::npos) << spec_name(ps);
  }
  const std::string pair_why = test::invalid_message([&] { make_gemm_spec(ip, pair_m); });
  EXPECT_NE(
      pair_why.find(
          "layout = indexed: cluster_m = 2 would pair tiles of different groups; use cluster_n"),
      std::string::npos)
      << pair_why;
}

// The checker's reading of an indexed table (what `fp8jit gemm --layout indexed` and the tuner
// compare against): each group one run from a multiple of 128 rows, -1 elsewhere; anything else
// is refused by row.
TEST(GroupedReferenceRows, IndexedTableRunsAndRefusals) {
  GroupedGemmArgs a;
  a.layout = GemmLayout::indexed;
  a.groups = 3;
  a.m = 384;
  std::vector<int> t(384, -1);
  std::fill(t.begin(), t.begin() + 100, 1);
  std::fill(t.begin() + 256, t.begin() + 301, 0);
  const std::vector<GroupRows> rows = group_rows_of(a, t);
  ASSERT_EQ(rows.size(), 2u);  // group 2 is empty
  EXPECT_EQ(rows[0].group, 0);
  EXPECT_EQ(rows[0].first, 256);
  EXPECT_EQ(rows[0].last, 301);
  EXPECT_EQ(rows[1].group, 1);
  EXPECT_EQ(rows[1].first, 0);
  EXPECT_EQ(rows[1].last, 100);
  auto refused = [&](std::vector<int> bad, const std::string& needle) {
    const std::string msg = test::invalid_message([&] { (void)group_rows_of(a, bad); });
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  };
  std::vector<int> off = t;
  off[130] = 2;  // a run that does not start on a multiple of 128
  refused(off, "group_rows[130]");
  std::vector<int> twice = t;
  twice[128] = 1;  // group 1 again, in a second run
  refused(twice, "group_rows[128]");
  std::vector<int> range = t;
  range[300] = 3;  // no such group
  refused(range, "group_rows[300] = 3");
  range[300] = -2;
  refused(range, "[-1, 3)");
}

}  // namespace
}  // namespace fp8jit
