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
  const KernelSpec tuned = make_gemm_spec(GemmProblem{}, {128, 96, 5, 4});
  const KernelSpec other = make_gemm_spec(GemmProblem{}, {128, 112, 5, 4});
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
  ship("h100.json", [&](const std::string& db) {
    store(db, h100, {4096, 7168, 2048}, tuned, 100.0);
  });
  const std::string user = dir_ + "/user.sqlite";
  auto lookup = [&](std::int64_t m, const GpuKey& gpu, TunePolicy policy,
                    const std::string& shipped) {
    return lookup_gemm(p, m, 7168, 2048, user, policy, gpu, 232448, shipped);
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
  store(user, h100, {1024, 7168, 2048}, other, 30.0);
  EXPECT_EQ(lookup(4096, h100, TunePolicy::cached, shipped_).source, LookupSource::nearest_m);
  EXPECT_EQ(lookup(4096, h100, TunePolicy::cached, shipped_).spec, other);
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

// FP8JIT_SHIPPED_TUNING naming a file, nothing, something far too long or a folder that is not
// there: `db list` still lists the user's rows, says there are no shipped ones, and writes
// nothing (the folder is not created).
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
  for (const std::string& value : {dir_ + "/a-file.json", std::string(), std::string(100000, 'd'),
                                   dir_ + "/not-there"}) {
    const std::string out = dir_ + "/../fp8jit-shipped-bad.out";
    const int raw = std::system(("FP8JIT_SHIPPED_TUNING='" + value + "' " + FP8JIT_CLI_PATH + " db list --db " + user +
                                 " >" + out + " 2>&1 </dev/null")
                                    .c_str());
    std::ifstream in(out);
    const std::string text(std::istreambuf_iterator<char>(in), {});
    std::filesystem::remove(out);
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
