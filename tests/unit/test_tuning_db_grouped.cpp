// Grouped (mixture-of-experts) gemm rows in the tuning database: keyed by the problem (layout
// included) and the group count, M being the expected rows per group; looked up exact, then the
// nearest tuned expected M of the same (layout, groups, N, K, problem), then the heuristic. Other
// group counts, other layouts and dense rows never answer for each other, and databases of
// earlier releases keep working beside grouped rows. Also the grouped sweep's candidates.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "autotune/lookup.hpp"
#include "autotune/tuner.hpp"
#include "autotune/tuning_db.hpp"
#include "autotune/tuning_db_internal.hpp"
#include "generator/family.hpp"
#include "runtime/jit/headers.hpp"
#include "tests/common/temp_dir.hpp"
#include "tuning_db_rows.hpp"

namespace fp8jit {
namespace {

using namespace tuning_rows;

constexpr int kSmem = 232448;
constexpr std::int64_t kN = 4096, kK = 7168;

GemmProblem grouped(GemmLayout layout) {
  GemmProblem p;
  p.layout = layout;
  return p;
}

const GemmProblem kContiguous = grouped(GemmLayout::contiguous);
const KernelSpec kTuned = make_gemm_spec(kContiguous, {128, 96, 5, 4});

TuneResult won_by(const KernelSpec& best, double us) {
  TuneResult r;
  r.candidates = {{best, CandidateStatus::passed, {us, us, us}, ""}};
  r.best = 0;
  return r;
}

class GroupedTuningDb : public ::testing::Test {
 protected:
  GemmLookup grouped_lookup(const GemmProblem& p, std::int64_t groups, std::int64_t expected_m,
                            std::int64_t n = kN, const GpuKey& gpu = kH200,
                            TunePolicy policy = TunePolicy::cached) const {
    return lookup_grouped_gemm(p, groups, expected_m, n, kK, path_, policy, gpu, kSmem);
  }
  GemmLookup dense_lookup(std::int64_t m) const {
    return lookup_gemm(GemmProblem{}, m, kN, kK, path_, TunePolicy::cached, kH200, kSmem);
  }
  void store_grouped(std::int64_t groups, std::int64_t expected_m, const KernelSpec& best,
                     double us = 100.0) {
    ASSERT_TRUE(
        store_grouped_gemm_result(path_, kH200, "node7 device 0", groups, {expected_m, kN, kK}, won_by(best, us)));
  }
  test::TempDir tmp_{"fp8jit_grouped_db"};
  const std::string path_ = tmp_.path() + "/tuning.sqlite";
};

TEST_F(GroupedTuningDb, ExactThenNearestExpectedMThenHeuristic) {
  store_grouped(8, 512, kTuned);
  EXPECT_EQ(grouped_lookup(kContiguous, 8, 512).source, LookupSource::exact);
  EXPECT_EQ(grouped_lookup(kContiguous, 8, 512).spec, kTuned);
  const GemmLookup near = grouped_lookup(kContiguous, 8, 300);
  EXPECT_EQ(near.source, LookupSource::nearest_m);
  EXPECT_EQ(near.spec, kTuned);
  // Another N, another GPU, the policy off, no database: the heuristic for these groups.
  const KernelSpec heuristic = default_grouped_gemm_spec(kContiguous, 8, 512, kN + 16, kK);
  EXPECT_EQ(grouped_lookup(kContiguous, 8, 512, kN + 16).spec, heuristic);
  EXPECT_EQ(grouped_lookup(kContiguous, 8, 512, kN, kH100).source, LookupSource::heuristic);
  EXPECT_EQ(grouped_lookup(kContiguous, 8, 512, kN, kH200, TunePolicy::off).source,
            LookupSource::heuristic);
  EXPECT_EQ(
      lookup_grouped_gemm(kContiguous, 8, 512, kN, kK, "", TunePolicy::cached, kH200, kSmem).source,
      LookupSource::heuristic);
  // The nearest of several expected Ms, ties to the larger; a row with 64-row tiles does not
  // stand in where the heuristic takes 128-row ones (more than 64 expected rows).
  const KernelSpec small = make_gemm_spec(kContiguous, {64, 128, 6, 8});
  store_grouped(8, 64, small);
  EXPECT_EQ(grouped_lookup(kContiguous, 8, 48).spec, small);
  EXPECT_EQ(grouped_lookup(kContiguous, 8, 100).source, LookupSource::heuristic);
  EXPECT_EQ(grouped_lookup(kContiguous, 8, 288).spec, kTuned);
}

TEST_F(GroupedTuningDb, OtherGroupCountsAndLayoutsDoNotMatch) {
  store_grouped(8, 512, kTuned);
  const GemmLookup other_groups = grouped_lookup(kContiguous, 16, 512);
  EXPECT_EQ(other_groups.source, LookupSource::heuristic);
  EXPECT_EQ(other_groups.spec, default_grouped_gemm_spec(kContiguous, 16, 512, kN, kK));
  const GemmProblem masked = grouped(GemmLayout::masked);
  EXPECT_EQ(grouped_lookup(masked, 8, 512).source, LookupSource::heuristic);
  // A masked row of the same groups and shape is its own row.
  const KernelSpec masked_best = make_gemm_spec(masked, {64, 96, 6, 8});
  store_grouped(8, 512, masked_best);
  EXPECT_EQ(grouped_lookup(masked, 8, 512).spec, masked_best);
  EXPECT_EQ(grouped_lookup(kContiguous, 8, 512).spec, kTuned);
  EXPECT_EQ(TuningDb(path_).list().size(), 2u);
}

TEST_F(GroupedTuningDb, DenseRowsAreUnaffected) {
  const KernelSpec dense = make_gemm_spec(GemmProblem{}, {256, 128, 3, 4});  // near the heuristic's
  ASSERT_TRUE(store_gemm_result(path_, kH200, "node7 device 0", {4096, kN, kK}, won_by(dense, 50.0)));
  // A grouped row nearer in M than the dense one is never a dense answer, nor the reverse.
  store_grouped(8, 512, kTuned);
  EXPECT_EQ(dense_lookup(4096).source, LookupSource::exact);
  EXPECT_EQ(dense_lookup(3000).source, LookupSource::nearest_m);
  EXPECT_EQ(dense_lookup(3000).spec, dense);
  // M = 600 is nearer the grouped row, which a dense lookup does not see, and too far from the
  // dense one (5 tiles along M against 32) to take it; the reverse likewise.
  EXPECT_EQ(dense_lookup(600).source, LookupSource::heuristic);
  EXPECT_EQ(grouped_lookup(kContiguous, 8, 600).spec, kTuned);
  EXPECT_EQ(grouped_lookup(kContiguous, 8, 600).source, LookupSource::nearest_m);
  EXPECT_EQ(grouped_lookup(kContiguous, 8, 4096).source, LookupSource::heuristic);
  // The dense key is what it always was: no group count.
  TuningDb db(path_);
  const auto row =
      db.get_exact(kH200, "gemm", problem_key(dense), 4096, kN, kK, tuning_space_hash("gemm"));
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->problem_key.find("groups"), std::string::npos);
}

TEST_F(GroupedTuningDb, KeysNameTheGroupCountAndRowsWithoutOneAreRefused) {
  const std::string key = grouped_problem_key(kTuned, 8);
  EXPECT_NE(key.find("\"groups\":8"), std::string::npos) << key;
  EXPECT_NE(key.find("\"layout\":\"contiguous\""), std::string::npos) << key;
  EXPECT_NE(grouped_problem_key(kTuned, 16), key);
  expect_error(
      [&] {
        grouped_problem_key(make_gemm_spec(GemmProblem{}, {128, 96, 5, 4}), 8);
      },
      ErrorKind::invalid_argument, {"dense", "problem_key"});
  expect_error([&] { grouped_problem_key(kTuned, 0); }, ErrorKind::invalid_argument,
               {"groups", "0"});

  TuningDb db(path_);
  TuningRecord r;
  r.gpu = kH200, r.op = "gemm", r.m = 512, r.n = kN, r.k = kK,
  r.space_hash = tuning_space_hash("gemm");
  r.best = kTuned, r.best_us = 10, r.timings = "[]";
  r.problem_key = problem_key(kTuned);  // no group count
  expect_error([&] { db.put(r); }, ErrorKind::invalid_argument, {"lacks its group count"});
  r.problem_key = R"({"a_format":"e4m3","groups":"8"})";
  expect_error([&] { db.put(r); }, ErrorKind::invalid_argument, {"groups"});
  r.problem_key = grouped_problem_key(kTuned, 8);
  r.best = make_gemm_spec(GemmProblem{}, {128, 96, 5, 4});  // a dense config under a grouped key
  expect_error([&] { db.put(r); }, ErrorKind::invalid_argument, {"does not match"});
  r.best = kTuned;
  EXPECT_TRUE(db.put(r));
}

TEST_F(GroupedTuningDb, ExportImportKeepsGroupedRows) {
  store_grouped(32, 64, make_gemm_spec(grouped(GemmLayout::masked), {64, 96, 6, 8}));
  const std::string exported = TuningDb(path_).export_json();
  EXPECT_NE(exported.find("groups"), std::string::npos);
  const std::string other = tmp_.path() + "/other.sqlite";
  EXPECT_EQ(TuningDb::import_into(other, exported).inserted, 1u);
  EXPECT_EQ(lookup_grouped_gemm(grouped(GemmLayout::masked), 32, 64, kN, kK, other,
                                TunePolicy::cached, kH200, kSmem)
                .source,
            LookupSource::exact);
}

// A database of the releases before schema 3 (dense rows only) opens, migrates and answers as
// before once grouped rows join it.
TEST_F(GroupedTuningDb, DatabasesOfEarlierReleasesKeepWorking) {
  const KernelSpec dense = make_gemm_spec(GemmProblem{}, {128, 96, 5, 4});
  TuningRecord old = quant_record(kH200, 4096, kK, 100.0, dense, 1);
  old.n = kN;
  old.space_hash = tuning_db_detail::legacy_space_hash(gemm_family(), embedded_headers().hash);
  {
    RawDb raw(path_);
    raw.exec(kV2Schema);
    raw.insert({old.gpu.str(), old.op, old.problem_key, old.m, old.n, old.k, old.space_hash,
                spec_to_json(old.best), old.best_us, old.timings, old.created_at});
  }
  store_grouped(8, 512, kTuned);
  EXPECT_EQ(TuningDb(path_).schema_version(), TuningDb::kSchemaVersion);
  EXPECT_EQ(dense_lookup(4096).source, LookupSource::exact);
  EXPECT_EQ(dense_lookup(4096).spec, dense);
  EXPECT_EQ(grouped_lookup(kContiguous, 8, 512).source, LookupSource::exact);
}

TEST(GroupedCandidates, HeuristicFirstValidDistinctAndOfTheLayout) {
  for (GemmLayout layout : {GemmLayout::contiguous, GemmLayout::masked}) {
    const GemmProblem p = grouped(layout);
    const auto c = grouped_gemm_candidates(p, 8, 512, kN, kK, 132, kSmem, 24);
    ASSERT_GT(c.size(), 4u);
    EXPECT_LE(c.size(), 24u);
    EXPECT_EQ(c.front(), default_grouped_gemm_spec(p, 8, 512, kN, kK, 132, kSmem));
    for (std::size_t i = 0; i < c.size(); ++i) {
      EXPECT_NO_THROW(validate_spec(c[i])) << spec_name(c[i]);
      EXPECT_EQ(gemm_problem_of(c[i]), p) << spec_name(c[i]);
      EXPECT_EQ(std::count(c.begin(), c.end(), c[i]), 1) << spec_name(c[i]);
    }
    // Decode-sized groups: no tile of more than 64 rows, most of which would be padding; masked
    // groups of 32 rows take 128-row tiles by default, and the tuner ranks both.
    for (const KernelSpec& s : grouped_gemm_candidates(p, 32, 16, kN, kK, 132, kSmem, 24))
      EXPECT_EQ(gemm_config_of(s).block_m, 64) << spec_name(s);
    std::set<int> heights;
    for (const KernelSpec& s : grouped_gemm_candidates(p, 32, 32, kN, kK, 132, kSmem, 0))
      heights.insert(gemm_config_of(s).block_m);
    EXPECT_EQ(heights.count(128), layout == GemmLayout::masked ? 1u : 0u);
    EXPECT_EQ(heights.count(64), 1u);
    EXPECT_GT(grouped_gemm_candidates(p, 8, 512, kN, kK, 132, kSmem, 0).size(), 24u);
  }
}

}  // namespace
}  // namespace fp8jit
