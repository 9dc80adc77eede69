// The autotuner's sweep logic and the runtime lookup, without a GPU: a scripted Bench stands in
// for compiling and timing, and a temporary tuning database holds the rows.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "autotune/lookup.hpp"
#include "autotune/tuner.hpp"
#include "autotune/tuning_db.hpp"
#include "common/stats.hpp"
#include "generator/families/gemm_geometry.hpp"
#include "generator/family.hpp"
#include "tests/unit/tuning_db_rows.hpp"

namespace fp8jit {
namespace {

std::vector<KernelSpec> some_gemm_specs(std::size_t n) {
  return gemm_candidates(GemmProblem{}, 4096, 7168, 7168, 132, 232448, n);
}

TEST(TunerSweep, FailuresAreRecordedAndNeverAbortTheSweep) {
  const std::vector<KernelSpec> c = some_gemm_specs(5);
  ASSERT_EQ(c.size(), 5u);
  Bench b;
  b.compile = [&](const KernelSpec& s) {
    if (s == c[1]) throw std::runtime_error("nvrtc: boom");
  };
  b.time = [&](const KernelSpec& s) {
    if (s == c[2]) throw std::runtime_error("CUDA_ERROR_LAUNCH_FAILED");
    Timing t;
    t.median_us = s == c[3] ? 5.0 : (s == c[4] ? 7.0 : 10.0);
    return t;
  };
  b.verify = [&](const KernelSpec& s) { return s == c[3] ? std::string("relative error 1e-1") : std::string(); };
  std::size_t progress_calls = 0;
  TuneOptions o;
  o.jobs = 2;
  o.progress = [&](const TuneProgress&) { ++progress_calls; };
  const TuneResult r = run_sweep(c, b, o);
  ASSERT_EQ(r.candidates.size(), 5u);
  EXPECT_EQ(r.candidates[0].status, CandidateStatus::passed);
  EXPECT_EQ(r.candidates[1].status, CandidateStatus::compile_failed);
  EXPECT_NE(r.candidates[1].error.find("boom"), std::string::npos);
  EXPECT_EQ(r.candidates[2].status, CandidateStatus::launch_failed);
  EXPECT_EQ(r.candidates[3].status, CandidateStatus::incorrect);  // fastest, but wrong: cannot win
  EXPECT_EQ(r.candidates[4].status, CandidateStatus::passed);
  ASSERT_TRUE(r.best.has_value());
  EXPECT_EQ(*r.best, 4u);
  EXPECT_EQ(progress_calls, 10u);  // one per compile and one per timing
}

TEST(TunerSweep, NothingPassesNoWinner) {
  const std::vector<KernelSpec> c = some_gemm_specs(3);
  Bench b;
  b.compile = [](const KernelSpec&) { throw std::runtime_error("no"); };
  b.time = [](const KernelSpec&) -> Timing { throw std::logic_error("must not time what did not compile"); };
  const TuneResult r = run_sweep(c, b, {});
  EXPECT_FALSE(r.best.has_value());
  for (const auto& x : r.candidates) EXPECT_EQ(x.status, CandidateStatus::compile_failed);
}

// A scripted Bench whose timings differ between the first round and the confirmation round.
struct TwoRounds {
  std::vector<KernelSpec> c;
  std::vector<double> first, second;
  std::vector<int> timed;  // how often each candidate was timed
  Bench bench() {
    timed.assign(c.size(), 0);
    Bench b;
    b.compile = [](const KernelSpec&) {};
    b.time = [this](const KernelSpec& s) {
      const std::size_t i = std::find(c.begin(), c.end(), s) - c.begin();
      Timing t;
      t.median_us = timed[i]++ == 0 ? first[i] : second[i];
      return t;
    };
    b.verify = [](const KernelSpec&) { return std::string(); };
    return b;
  }
};

TEST(TunerSweep, ALuckyFirstRoundDoesNotDisplaceTheDefault) {
  TwoRounds t{some_gemm_specs(5), {10.0, 9.5, 12.0, 9.8, 11.0}, {10.0, 10.1, 12.0, 10.3, 11.0}, {}};
  const TuneResult r = run_sweep(t.c, t.bench(), {});
  ASSERT_TRUE(r.best.has_value());
  EXPECT_EQ(*r.best, 0u);
  // The three fastest of the first round (the default among them) were timed again, no others.
  EXPECT_EQ(t.timed, (std::vector<int>{2, 2, 1, 2, 1}));
  EXPECT_DOUBLE_EQ(r.candidates[1].timing.median_us, 10.1);
}

TEST(TunerSweep, AChallengerMustBeatTheDefaultByTheMargin) {
  TwoRounds near{some_gemm_specs(4), {10.0, 9.0, 12.0, 12.0}, {10.0, 9.9, 12.0, 12.0}, {}};
  EXPECT_EQ(run_sweep(near.c, near.bench(), {}).best, 0u);  // 1 % faster: within the 2 % margin
  TwoRounds clear{some_gemm_specs(4), {10.0, 9.0, 8.0, 12.0}, {10.0, 9.0, 8.5, 12.0}, {}};
  EXPECT_EQ(run_sweep(clear.c, clear.bench(), {}).best, 2u);
  TuneOptions single_round;
  single_round.finalists = 0;
  TwoRounds off{some_gemm_specs(4), {10.0, 9.9, 12.0, 12.0}, {10.0, 11.0, 12.0, 12.0}, {}};
  EXPECT_EQ(run_sweep(off.c, off.bench(), single_round).best, 1u);
}

TEST(TunerSweep, WithoutAPassingDefaultTheSecondRoundDecides) {
  TwoRounds t{some_gemm_specs(4), {10.0, 9.0, 9.5, 12.0}, {10.0, 9.8, 9.6, 12.0}, {}};
  Bench b = t.bench();
  b.verify = [&](const KernelSpec& s) { return s == t.c[0] ? std::string("relative error 1e-1") : std::string(); };
  const TuneResult r = run_sweep(t.c, b, {});
  EXPECT_EQ(r.best, 2u);
  EXPECT_EQ(t.timed[0], 1);  // a default that failed is not timed again
}

TEST(TunerSweep, FinalistsThatFailTheirSecondRunLeaveTheRest) {
  TwoRounds t{some_gemm_specs(5), {10.0, 9.0, 9.5, 12.0, 11.0}, {}, {}};
  Bench b = t.bench();
  int runs = 0;
  b.time = [&](const KernelSpec& s) {
    const std::size_t i = std::find(t.c.begin(), t.c.end(), s) - t.c.begin();
    if (t.timed[i]++ > 0) throw std::runtime_error("CUDA_ERROR_LAUNCH_FAILED");
    ++runs;
    Timing x;
    x.median_us = t.first[i];
    return x;
  };
  const TuneResult r = run_sweep(t.c, b, {});
  EXPECT_EQ(runs, 5);
  EXPECT_EQ(r.candidates[1].status, CandidateStatus::launch_failed);
  EXPECT_EQ(r.best, 4u);  // the only one not re-run
}

TEST(TunerTiming, Percentiles) {
  const Timing t = summarize({9, 1, 5, 3, 7});
  EXPECT_DOUBLE_EQ(t.median_us, 5);
  EXPECT_DOUBLE_EQ(t.p20_us, 3);
  EXPECT_DOUBLE_EQ(t.p80_us, 7);
}

// A candidate timed on several group tables (TuneOptions::more_group_rows): each quantile is the
// geometric mean of its values, so a table twice as slow as another weighs as much as it.
TEST(TunerTiming, GeometricMeanOverTables) {
  const Timing t = geometric_mean_timing({{100, 90, 110}, {400, 360, 440}});
  EXPECT_DOUBLE_EQ(t.median_us, 200);
  EXPECT_DOUBLE_EQ(t.p20_us, 180);
  EXPECT_DOUBLE_EQ(t.p80_us, 220);
  const Timing one = geometric_mean_timing({{7, 6, 8}});
  EXPECT_DOUBLE_EQ(one.median_us, 7);
  EXPECT_DOUBLE_EQ(geometric_mean_timing({}).median_us, 0);
}

// One median for the tuner, the CLI's timings and the benchmarks: element n / 2 of the sorted
// samples (the upper middle of an even count), the same as summarize's.
TEST(TunerTiming, OneMedianEverywhere) {
  EXPECT_DOUBLE_EQ(median({9, 1, 5, 3, 7}), 5);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 3);
  EXPECT_DOUBLE_EQ(median({2.5}), 2.5);
  EXPECT_DOUBLE_EQ(median({}), 0);
  for (std::size_t n = 1; n <= 40; ++n) {
    std::vector<double> s;
    for (std::size_t i = 0; i < n; ++i) s.push_back(static_cast<double>((i * 7919) % 101));
    EXPECT_DOUBLE_EQ(summarize(s).median_us, median(s)) << n;
  }
}

TEST(TunerCandidates, DefaultFirstValidDistinctAndCapped) {
  for (auto [m, n, k] : {std::tuple{64, 2112, 7168}, std::tuple{4096, 24576, 1536}, std::tuple{1, 16, 16}}) {
    const GemmProblem p;
    const auto c = gemm_candidates(p, m, n, k, 132, 232448, 32);
    ASSERT_EQ(c.size(), 32u);
    EXPECT_EQ(c[0], default_gemm_spec(p, m, n, k));
    for (std::size_t i = 0; i < c.size(); ++i) {
      EXPECT_NO_THROW(validate_spec(c[i]));
      EXPECT_LE(gemm_geometry(p, gemm_config_of(c[i])).smem_bytes, 232448);
      for (std::size_t j = 0; j < i; ++j) EXPECT_FALSE(c[i] == c[j]);
      if (m <= 64) EXPECT_EQ(gemm_config_of(c[i]).block_m, 64);
    }
  }
  EXPECT_GT(gemm_candidates(GemmProblem{}, 4096, 4096, 4096, 132, 232448, 0).size(), 500u);
}

// The distinct tiles come with raster groups spanning the default's rows: 256-row tiles in groups
// of 8 where the default's 128-row tile takes 16 (2048 rows either way).
TEST(TunerCandidates, RasterGroupsSpanTheDefaultsRows) {
  for (ScaleMode scale : {ScaleMode::block, ScaleMode::tensor}) {
    GemmProblem p;
    p.scale = scale;
    const auto c = gemm_candidates(p, 4096, 4096, 7168, 132, 232448, 0);
    const GemmConfig base = gemm_config_of(c[0]);
    ASSERT_EQ(base.block_m * base.group_m, 2048);
    const auto tall = std::find_if(
        c.begin(), c.end(), [](const KernelSpec& s) { return gemm_config_of(s).block_m == 256; });
    ASSERT_NE(tall, c.end());
    EXPECT_EQ(gemm_config_of(*tall).group_m, 8);
  }
}

// Decode-sized M: one narrow tile per SM over all of K (no split-K, deepest pipeline), alone and
// in CTA pairs sharing A, as cuBLASLt's kernel for 128x4096x7168 (128x40, 10 stages, pairs),
// right after the default; not for shapes with many tile-rows.
TEST(TunerCandidates, DecodeShapesTryOneWaveOfNarrowTiles) {
  for (ScaleMode scale : {ScaleMode::tensor, ScaleMode::block}) {
    GemmProblem p;
    p.scale = scale;
    const auto c = gemm_candidates(p, 128, 4096, 7168, 132, 232448, 32);
    std::vector<std::pair<int, int>> tiles;  // (block_n, cluster_n)
    for (std::size_t i = 1; i <= 6; ++i) {
      const GemmConfig g = gemm_config_of(c[i]);
      EXPECT_EQ(g.block_m, 128);
      EXPECT_EQ(g.cluster_m, 1);
      EXPECT_LE((4096 + g.block_n - 1) / g.block_n, 132);
      EXPECT_EQ(gemm_split_k(128, 4096, 7168, g, 132), 1);
      GemmConfig deeper = g;  // the deepest pipeline that fits
      ++deeper.stages;
      EXPECT_TRUE(g.stages == 16 || gemm_geometry(p, deeper).smem_bytes > 232448) << g.stages;
      EXPECT_GE(g.stages, 8);
      tiles.emplace_back(g.block_n, g.cluster_n);
    }
    EXPECT_EQ(tiles, (std::vector<std::pair<int, int>>{{32, 1}, {32, 2}, {40, 1}, {40, 2}, {48, 1}, {48, 2}}));
    EXPECT_GE(gemm_config_of(c[7]).block_n, 64);
  }
  for (const KernelSpec& s : gemm_candidates(GemmProblem{}, 4096, 4096, 7168, 132, 232448, 8))
    EXPECT_GE(gemm_config_of(s).block_n, 64);
}

class TunerLookup : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fp8jit-lookup-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    db_ = dir_ + "/t.sqlite";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void store(const GpuKey& gpu, GemmShape s, const KernelSpec& best, double us) {
    ASSERT_TRUE(
        store_gemm_result(db_, gpu, "node7 device 0", s, tuning_rows::passed_winner(best, us)));
  }
  std::string dir_, db_;
  GpuKey h200{"NVIDIA H200", 9, 0, 132}, h100{"NVIDIA H100 80GB HBM3", 9, 0, 132};
};

TEST_F(TunerLookup, ExactThenNearestMThenHeuristic) {
  const GemmProblem p;
  const KernelSpec tuned = make_gemm_spec(p, {128, 192, 4, 4});  // near the heuristic's cost
  store(h200, {4096, 7168, 2048}, tuned, 100.0);
  auto exact = lookup_gemm(p, 4096, 7168, 2048, db_, TunePolicy::cached, h200, 232448);
  EXPECT_EQ(exact.source, LookupSource::exact);
  EXPECT_EQ(exact.spec, tuned);
  EXPECT_EQ(TuningDb(db_).list().at(0).tuned_on, "node7 device 0");  // the card that timed it
  auto near = lookup_gemm(p, 3000, 7168, 2048, db_, TunePolicy::cached, h200, 232448);
  EXPECT_EQ(near.source, LookupSource::nearest_m);
  EXPECT_EQ(near.spec, tuned);
  // Another N, another GPU, the policy off, or no database: the heuristic.
  EXPECT_EQ(lookup_gemm(p, 4096, 7168 + 16, 2048, db_, TunePolicy::cached, h200, 232448).source, LookupSource::heuristic);
  EXPECT_EQ(lookup_gemm(p, 4096, 7168, 2048, db_, TunePolicy::cached, h100, 232448).source, LookupSource::heuristic);
  EXPECT_EQ(lookup_gemm(p, 4096, 7168, 2048, db_, TunePolicy::off, h200, 232448).source, LookupSource::heuristic);
  EXPECT_EQ(lookup_gemm(p, 4096, 7168, 2048, "", TunePolicy::cached, h200, 232448).source, LookupSource::heuristic);
  // Another problem (fp32 output) never sees the bf16 row.
  GemmProblem q;
  q.out = DType::fp32;
  EXPECT_EQ(lookup_gemm(q, 4096, 7168, 2048, db_, TunePolicy::cached, h200, 232448).source, LookupSource::heuristic);
}

TEST_F(TunerLookup, MissingDatabaseIsNotCreatedByALookup) {
  const auto r = lookup_gemm(GemmProblem{}, 64, 2112, 7168, db_, TunePolicy::cached, h200, 232448);
  EXPECT_EQ(r.source, LookupSource::heuristic);
  EXPECT_FALSE(std::filesystem::exists(db_));
}

TEST_F(TunerLookup, DamagedDatabaseFallsBackToTheHeuristic) {
  {
    std::FILE* f = std::fopen(db_.c_str(), "wb");
    std::fputs("this is not an SQLite database, just bytes", f);
    std::fclose(f);
  }
  const auto r = lookup_gemm(GemmProblem{}, 64, 2112, 7168, db_, TunePolicy::cached, h200, 232448);
  EXPECT_EQ(r.source, LookupSource::heuristic);
  EXPECT_EQ(r.spec, default_gemm_spec(GemmProblem{}, 64, 2112, 7168));
}

TEST(TunerSpaceHash, StablePerFamilyAndDistinct) {
  EXPECT_EQ(tuning_space_hash("gemm"), tuning_space_hash("gemm"));
  EXPECT_NE(tuning_space_hash("gemm"), tuning_space_hash("quantize"));
  EXPECT_EQ(tuning_space_hash("gemm").size(), 16u);
}

}  // namespace
}  // namespace fp8jit
