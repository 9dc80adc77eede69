// Tuned rows shipped with fp8jit (autotune/shipped_rows.hpp): read from `fp8jit db export`
// documents, a bad document skipped, matched as the database's rows are, consulted after the
// user's database and before the heuristic, and listed by `fp8jit db list` with their file.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "autotune/lookup.hpp"
#include "autotune/shipped_rows.hpp"
#include "autotune/tuning_db.hpp"
#include "fp8jit/runtime.hpp"
#include "tests/common/temp_dir.hpp"
#include "tests/unit/tuning_db_rows.hpp"

namespace fp8jit {
namespace {

class ShippedRowsTest : public ::testing::Test {
 protected:
  void SetUp() override { std::filesystem::create_directories(shipped_); }

  // One row stored into the database at `db` (as a sweep stores its winner).
  static void store(const std::string& db, const GpuKey& gpu, GemmShape s, const KernelSpec& best,
                    double us) {
    ASSERT_TRUE(store_gemm_result(db, gpu, "shipping host device 0", s,
                                  tuning_rows::passed_winner(best, us)));
  }
  // A shipped document NAME holding the rows stored into a scratch database by `fill`.
  template <class F>
  void ship(const std::string& name, F&& fill) {
    const std::string db = dir_ + "/" + name + ".sqlite";
    fill(db);
    std::ofstream(shipped_ + "/" + name) << TuningDb(db).export_json();
  }

  test::TempDir tmp_{"fp8jit-shipped"};
  const std::string dir_ = tmp_.path(), shipped_ = dir_ + "/tuning";
  const GpuKey h100{"NVIDIA H100 80GB HBM3", 9, 0, 132}, h200{"NVIDIA H200", 9, 0, 132};
  const GemmProblem p;
  // Close to the heuristic's tiles at the shapes below (the cost model rates them within 5 %, so
  // they may stand in for a nearby M), and told apart by their rasters.
  const KernelSpec tuned = make_gemm_spec(GemmProblem{}, {128, 192, 4, 8});
  const KernelSpec other = make_gemm_spec(GemmProblem{}, {128, 192, 4, 4});
};

TEST_F(ShippedRowsTest, ReadsDocumentsSkipsBadOnesAndMatchesLikeTheDatabase) {
  ship("h100.json", [&](const std::string& db) {
    store(db, h100, {4096, 7168, 2048}, tuned, 100.0);
    store(db, h100, {512, 7168, 2048}, other, 20.0);
  });
  std::ofstream(shipped_ + "/broken.json") << R"({"format": "fp8jit-tuning")";
  std::ofstream(shipped_ + "/notes.txt") << "not a document";
  const ShippedRows rows = ShippedRows::read(shipped_);
  ASSERT_EQ(rows.rows().size(), 2u);
  EXPECT_EQ(rows.rows()[0].file, "h100.json");
  const std::string space = tuning_space_hash("gemm");
  const std::string key = problem_key(tuned);
  ASSERT_NE(rows.exact(h100, "gemm", key, 4096, 7168, 2048, space), nullptr);
  EXPECT_EQ(rows.exact(h100, "gemm", key, 4096, 7168, 2048, space)->record.best, tuned);
  EXPECT_EQ(rows.exact(h100, "gemm", key, 4000, 7168, 2048, space), nullptr);
  // Nearest M: 2304 is as far from 512 as from 4096, and the larger M wins the tie.
  EXPECT_EQ(rows.nearest_m(h100, "gemm", key, 1000, 7168, 2048, space)->record.best, other);
  EXPECT_EQ(rows.nearest_m(h100, "gemm", key, 2304, 7168, 2048, space)->record.best, tuned);
  // Another GPU, N, K or config space: nothing.
  EXPECT_EQ(rows.nearest_m(h200, "gemm", key, 4096, 7168, 2048, space), nullptr);
  EXPECT_EQ(rows.nearest_m(h100, "gemm", key, 4096, 7168 + 16, 2048, space), nullptr);
  EXPECT_EQ(rows.nearest_m(h100, "gemm", key, 4096, 7168, 4096, space), nullptr);
  EXPECT_EQ(rows.nearest_m(h100, "gemm", key, 4096, 7168, 2048, "another space"), nullptr);
  // No directory, a file instead of one, none named, or a path far too long: no rows.
  EXPECT_TRUE(ShippedRows::read(dir_ + "/missing").rows().empty());
  EXPECT_TRUE(ShippedRows::read(shipped_ + "/notes.txt").rows().empty());
  EXPECT_TRUE(ShippedRows::read("").rows().empty());
  EXPECT_TRUE(ShippedRows::read(std::string(100000, 'd')).rows().empty());
}

// Documents that are not files to read (a FIFO, which would block a plain read; an empty file; a
// folder named like one) are skipped without a hang, and the good one is still read.
TEST_F(ShippedRowsTest, WhatIsNotADocumentIsSkipped) {
  ship("good.json", [&](const std::string& db) {
    store(db, h100, {4096, 7168, 2048}, tuned, 100.0);
  });
  ASSERT_EQ(mkfifo((shipped_ + "/fifo.json").c_str(), 0600), 0);
  std::ofstream(shipped_ + "/empty.json");
  std::filesystem::create_directories(shipped_ + "/folder.json");
  const ShippedRows rows = ShippedRows::read(shipped_);
  ASSERT_EQ(rows.rows().size(), 1u);
  EXPECT_EQ(rows.rows()[0].file, "good.json");
}

TEST_F(ShippedRowsTest, AfterTheUsersDatabaseBeforeTheHeuristic) {
  // 12 K blocks: the heuristic's tile is 128 rows high, as the rows' are (a row stands in for
  // the nearest M only with the heuristic's tile height).
  ship("h100.json", [&](const std::string& db) {
    store(db, h100, {4096, 7168, 1536}, tuned, 100.0);
  });
  const std::string user = dir_ + "/user.sqlite";
  auto lookup = [&](std::int64_t m, const GpuKey& gpu, TunePolicy policy,
                    const std::string& shipped) {
    return lookup_gemm(p, m, 7168, 1536, user, policy, gpu, 232448, shipped);
  };
  // No user database: the shipped row, exact or for the nearest M.
  EXPECT_EQ(lookup(4096, h100, TunePolicy::cached, shipped_).source, LookupSource::shipped);
  EXPECT_EQ(lookup(4096, h100, TunePolicy::cached, shipped_).spec, tuned);
  EXPECT_EQ(lookup(3000, h100, TunePolicy::cached, shipped_).source,
            LookupSource::shipped_nearest_m);
  // Another GPU, no shipped directory, or tuning off: the heuristic.
  EXPECT_EQ(lookup(4096, h200, TunePolicy::cached, shipped_).source, LookupSource::heuristic);
  EXPECT_EQ(lookup(4096, h100, TunePolicy::cached, "").source, LookupSource::heuristic);
  EXPECT_EQ(lookup(4096, h100, TunePolicy::off, shipped_).source, LookupSource::heuristic);
  // The user's own rows win, even a nearest-M one over a shipped exact row.
  store(user, h100, {3072, 7168, 1536}, other, 80.0);
  EXPECT_EQ(lookup(4096, h100, TunePolicy::cached, shipped_).source, LookupSource::nearest_m);
  EXPECT_EQ(lookup(4096, h100, TunePolicy::cached, shipped_).spec, other);
}

// A row tuned for another M stands in only on the same side of the swap boundary as the
// heuristic's choice at the call's M (GemmConfig::swap_ab): shipped or the user's own.
TEST_F(ShippedRowsTest, NearestMRowsDoNotCrossTheOperandSwap) {
  GemmConfig c{64, 8, 16, 8};
  c.swap_ab = 1;
  const KernelSpec decode = make_gemm_spec(p, c);
  ship("h100.json", [&](const std::string& db) {
    store(db, h100, {1, 6144, 4096}, decode, 14.0);
    store(db, h100, {4096, 6144, 4096}, tuned, 150.0);
  });
  const std::string user = dir_ + "/user.sqlite";
  auto lookup = [&](std::int64_t m) {
    return lookup_gemm(p, m, 6144, 4096, user, TunePolicy::cached, h100, 232448, shipped_);
  };
  EXPECT_EQ(lookup(1).spec, decode);
  EXPECT_EQ(lookup(8).source, LookupSource::shipped_nearest_m);  // swapped both
  EXPECT_EQ(lookup(8).spec, decode);
  // M = 40 is nearest to the swapped row at M = 1 but is not swapped: the heuristic.
  EXPECT_EQ(lookup(40).source, LookupSource::heuristic);
  EXPECT_EQ(gemm_config_of(lookup(40).spec).swap_ab, 0);
  EXPECT_EQ(lookup(3000).spec, tuned);
  // The user's database: its nearest row at M = 4096 does not stand in for M = 2, which falls to
  // the shipped swapped row.
  store(user, h100, {4096, 6144, 4096}, other, 140.0);
  EXPECT_EQ(lookup(2).source, LookupSource::shipped_nearest_m);
  EXPECT_EQ(lookup(3000).source, LookupSource::nearest_m);
  EXPECT_EQ(lookup(3000).spec, other);
}

// Nor across the tile height the heuristic picks at the call's M: a decode row's 64-row tile
// (tuned at M = 128) does not stand in for M = 4096, where the shipped exact row, else the
// heuristic, runs; at M = 100 it does.
TEST_F(ShippedRowsTest, NearestMRowsKeepTheTileHeight) {
  const KernelSpec decode = make_gemm_spec(p, {64, 32, 16, 8});
  const std::string user = dir_ + "/user.sqlite";
  store(user, h100, {128, 2112, 7168}, decode, 13.8);
  auto lookup = [&](std::int64_t m, const std::string& shipped) {
    return lookup_gemm(p, m, 2112, 7168, user, TunePolicy::cached, h100, 232448, shipped);
  };
  EXPECT_EQ(lookup(128, "").source, LookupSource::exact);
  EXPECT_EQ(lookup(100, "").source, LookupSource::nearest_m);
  EXPECT_EQ(lookup(100, "").spec, decode);
  EXPECT_EQ(lookup(4096, "").source, LookupSource::heuristic);
  EXPECT_EQ(gemm_config_of(lookup(4096, "").spec).block_m, 128);
  ship("h100.json", [&](const std::string& db) { store(db, h100, {4096, 2112, 7168}, tuned, 100.0); });
  EXPECT_EQ(lookup(4096, shipped_).source, LookupSource::shipped);
  EXPECT_EQ(lookup(4096, shipped_).spec, tuned);
}

// Nor from an M whose tiles along M are more than 1.5x as many or as few, nor (dense) where the
// cost model rates the row's config at the call's M more than 10 % above the heuristic's: the
// cases measured on the H100 (bench/shapes/deepseek_v3_other_m.csv), where such stand-ins ran
// 0.58-0.83x the heuristic's speed.
TEST_F(ShippedRowsTest, NearestMRowsOnlyForAsManyTilesAtACostNearTheHeuristics) {
  GemmProblem tensor;
  tensor.scale = ScaleMode::tensor;
  const KernelSpec decode_wide = make_gemm_spec(p, {128, 64, 6, 8});  // tuned at M = 128
  const KernelSpec tensor_176 = make_gemm_spec(tensor, {128, 176, 4, 16});
  const KernelSpec block_192 = make_gemm_spec(p, {128, 192, 4, 16});
  ship("h100.json", [&](const std::string& db) {
    store(db, h100, {128, 7168, 16384}, decode_wide, 50.0);
    store(db, h100, {4096, 2112, 7168}, tensor_176, 95.0);
    store(db, h100, {4096, 8192, 512}, block_192, 40.0);
  });
  auto lookup = [&](const GemmProblem& problem, std::int64_t m, std::int64_t n, std::int64_t k) {
    return lookup_gemm(problem, m, n, k, "", TunePolicy::cached, h100, 232448, shipped_);
  };
  EXPECT_EQ(lookup(p, 128, 7168, 16384).source, LookupSource::shipped);
  // 8 row tiles against 1 (1024x7168x16384 ran 195.1 -> 333.3 µs on the row), 2 against 1.
  EXPECT_EQ(lookup(p, 1024, 7168, 16384).source, LookupSource::heuristic);
  EXPECT_EQ(lookup(p, 256, 7168, 16384).source, LookupSource::heuristic);
  // 48 row tiles against 32, but 1.17x the cost of the heuristic's 128x192 per tensor
  // (6144x2112x7168 lost 17 %).
  EXPECT_EQ(lookup(tensor, 6144, 2112, 7168).source, LookupSource::heuristic);
  // 48 against 32 near the heuristic's cost (as 6144x32768x512 block 230.1 -> 210.7 µs on the
  // H100 before the heuristic took 256x128 there): taken.
  EXPECT_EQ(lookup(p, 6144, 8192, 512).source, LookupSource::shipped_nearest_m);
  EXPECT_EQ(lookup(p, 6144, 8192, 512).spec, block_192);
  EXPECT_EQ(lookup(p, 6400, 8192, 512).source, LookupSource::heuristic);  // 50 tiles against 32
}

TEST_F(ShippedRowsTest, DbListSaysWhereEachRowComesFrom) {
  ship("h100-deepseek.json", [&](const std::string& db) {
    store(db, h100, {4096, 7168, 2048}, tuned, 100.0);
  });
  const std::string user = dir_ + "/user.sqlite";
  store(user, h200, {64, 7168, 2048}, other, 9.0);
  auto list = [&](const std::string& env) {
    const std::string out = dir_ + "/list.out";
    const int raw = std::system(
        (env + " " + FP8JIT_CLI_PATH + " db list --db " + user + " >" + out + " 2>&1 </dev/null")
            .c_str());
    std::ifstream in(out);
    return std::pair{WIFEXITED(raw) ? WEXITSTATUS(raw) : -1,
                     std::string(std::istreambuf_iterator<char>(in), {})};
  };
  auto [status, text] = list("FP8JIT_SHIPPED_TUNING=" + shipped_);
  EXPECT_EQ(status, 0) << text;
  EXPECT_NE(text.find("shipped: h100-deepseek.json"), std::string::npos) << text;
  EXPECT_NE(text.find("database"), std::string::npos) << text;
  EXPECT_NE(text.find(spec_name(tuned)), std::string::npos) << text;
  std::tie(status, text) = list("FP8JIT_SHIPPED_TUNING=off");
  EXPECT_EQ(status, 0) << text;
  EXPECT_EQ(text.find("shipped: "), std::string::npos) << text;
  EXPECT_NE(text.find("no shipped tuning rows (FP8JIT_SHIPPED_TUNING=off)"), std::string::npos)
      << text;
}

// FP8JIT_SHIPPED_TUNING naming a file, something far too long or a folder that is not there:
// `db list` still lists the user's rows, says there are no shipped ones, and writes nothing (the
// folder is not created). Set empty, it reads as unset.
TEST_F(ShippedRowsTest, BadShippedFoldersListNothingAndWriteNothing) {
  const std::string user = dir_ + "/user.sqlite";
  store(user, h200, {64, 7168, 2048}, other, 9.0);
  std::ofstream(dir_ + "/a-file.json") << "{}";
  auto files = [&] {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir_))
      if (e.path().filename().string().rfind("user.sqlite", 0) != 0)  // the database's own sidecars
        names.push_back(e.path().string());
    std::sort(names.begin(), names.end());
    return names;
  };
  const std::vector<std::string> before = files();
  // `db list` with FP8JIT_SHIPPED_TUNING set to `value` (unset for nullptr): exit status, output.
  const auto list = [&](const std::string* value) {
    const std::string out = dir_ + "/../fp8jit-shipped-bad.out";
    const std::string set =
        value ? "FP8JIT_SHIPPED_TUNING='" + *value + "' " : "env -u FP8JIT_SHIPPED_TUNING ";
    const int raw = std::system(
        (set + FP8JIT_CLI_PATH + " db list --db " + user + " >" + out + " 2>&1 </dev/null")
            .c_str());
    std::ifstream in(out);
    std::string text(std::istreambuf_iterator<char>(in), {});
    std::filesystem::remove(out);
    return std::pair{raw, text};
  };
  // Empty is unset, as for every FP8JIT_* variable: the default folder (the tree's own documents).
  const std::string empty;
  EXPECT_EQ(list(&empty).second, list(nullptr).second);
  for (const std::string& value :
       {dir_ + "/a-file.json", std::string(100000, 'd'), dir_ + "/not-there"}) {
    const auto [raw, text] = list(&value);
    EXPECT_TRUE(WIFEXITED(raw) && WEXITSTATUS(raw) == 0) << value.size() << ": " << text;
    EXPECT_NE(text.find("no shipped tuning rows"), std::string::npos) << text.substr(0, 400);
    EXPECT_NE(text.find(spec_name(other)), std::string::npos) << text.substr(0, 400);
    EXPECT_EQ(files(), before) << value.size();
  }
}

TEST(ShippedRowsDefault, BesideTheLibrarysShareFolder) {
  const std::string dir = default_shipped_tuning_dir();
  ASSERT_FALSE(dir.empty());
  EXPECT_TRUE(dir.ends_with("share/fp8jit/tuning")) << dir;
  EXPECT_EQ(RuntimeOptions{}.shipped_tuning_dir, dir);
}

}  // namespace
}  // namespace fp8jit

namespace fp8jit {
namespace {

// The documents shipped in this tree (share/fp8jit/tuning): every row reads (none skipped as bad),
// names a valid gemm spec of its own problem, and was tuned on this build's config space. A
// change to the gemm config space leaves rows that no lookup would match: re-tune them on their
// GPU, or remove the document, rather than ship rows that are never used.
TEST(ShippedRowsInTree, EveryRowIsUsableByThisBuild) {
  const std::string dir = FP8JIT_SOURCE_DIR "/share/fp8jit/tuning";
  std::size_t documents = 0, listed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    ++documents;
    std::ifstream in(entry.path());
    const nlohmann::json doc = nlohmann::json::parse(in);
    listed += doc.at("rows").size();
  }
  const ShippedRows shipped = ShippedRows::read(dir);
  EXPECT_EQ(shipped.rows().size(), listed) << "rows skipped as bad: see the warnings above";
  const std::string space = tuning_space_hash("gemm");
  for (const ShippedRow& r : shipped.rows()) {
    SCOPED_TRACE(testing::Message() << r.file << ": " << r.record.gpu.name << " " << r.record.m
                                    << "x" << r.record.n << "x" << r.record.k);
    EXPECT_EQ(r.record.op, "gemm");
    EXPECT_EQ(r.record.space_hash, space) << "tuned on another config space: re-tune or remove";
    EXPECT_NO_THROW(validate_spec(r.record.best));
    // Grouped rows (the MoE suite) carry their group count in the key.
    const nlohmann::json key = nlohmann::json::parse(r.record.problem_key);
    if (key.contains("groups"))
      EXPECT_EQ(r.record.problem_key,
                grouped_problem_key(r.record.best, key.at("groups").get<std::int64_t>()));
    else
      EXPECT_EQ(r.record.problem_key, problem_key(r.record.best));
    EXPECT_GT(r.record.best_us, 0);
  }
  if (documents == 0) GTEST_SKIP() << "no shipped documents in " << dir;
  EXPECT_GT(listed, 0u);
}

}  // namespace
}  // namespace fp8jit
