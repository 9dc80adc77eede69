// The SQLite tuning database: schema and migrations, merge rules, nearest-M lookup, distrust of
// stored rows, recovery from damaged files, import/export, and many writer processes at once.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <tuple>
#include <variant>

#include "autotune/tuning_db.hpp"
#include "fp8jit/error.hpp"
#include "fp8jit/fp8jit.h"
#include "fp8jit/tuning.hpp"
#include "runtime/jit/driver.hpp"
#include "tuning_db_rows.hpp"

namespace fp8jit {
namespace {

namespace fs = std::filesystem;
using namespace tuning_rows;

class TuningDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fp8jit_tuning_db_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/nested/dir/tuning.sqlite";  // open must create the missing directories
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string dir_, path_;
};

TEST_F(TuningDbTest, CreatesSchemaAtCurrentVersionInWalMode) {
  {
    TuningDb db(path_);
    EXPECT_EQ(db.schema_version(), TuningDb::kSchemaVersion);
  }
  ASSERT_TRUE(fs::exists(path_));
  RawDb raw(path_);
  EXPECT_EQ(raw.scalar("SELECT value FROM meta WHERE key = 'schema_version'"),
            std::to_string(TuningDb::kSchemaVersion));
  EXPECT_EQ(raw.scalar("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(raw.scalar("SELECT count(*) FROM sqlite_master WHERE name IN ('results', 'meta', "
                       "'results_by_shape')"),
            "3");
  EXPECT_EQ(raw.scalar("SELECT count(*) FROM results"), "0");
}

TEST_F(TuningDbTest, MigratesVersion1Database) {
  fs::create_directories(fs::path(path_).parent_path());
  {
    RawDb raw(path_);
    raw.exec(kV1Schema);
    raw.exec("INSERT INTO meta VALUES ('schema_version', 1)");
    raw.insert(raw_row(kH200.str(), std::int64_t{128}, spec_to_json(kQuant), 7.5));
  }
  TuningDb db(path_);
  EXPECT_EQ(db.schema_version(), TuningDb::kSchemaVersion);
  RawDb raw(path_);
  EXPECT_EQ(
      raw.scalar(
          "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'results_by_shape'"),
      "1");
  auto r = db.get_exact(kH200, "quantize", kQuantProblem, 128, 0, 4096, "space-1");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->best, kQuant);
  EXPECT_EQ(r->best_us, 7.5);
  EXPECT_EQ(r->fp8jit_version, "unknown");  // tuned before versions were recorded
}

TEST_F(TuningDbTest, RefusesNewerSchemaVersion) {
  fs::create_directories(fs::path(path_).parent_path());
  {
    RawDb raw(path_);
    raw.exec(kV1Schema);
    raw.exec("INSERT INTO meta VALUES ('schema_version', 99)");
  }
  expect_error([&] { TuningDb db(path_); }, ErrorKind::io, {path_, "schema version 99", "newer"});
  RawDb raw(path_);  // untouched
  EXPECT_EQ(raw.scalar("SELECT value FROM meta WHERE key = 'schema_version'"), "99");
  EXPECT_EQ(
      raw.scalar(
          "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'results_by_shape'"),
      "0");
}

TEST_F(TuningDbTest, PutGetRoundTripAndRejectsBadRecords) {
  TuningDb db(path_);
  TuningRecord r = quant_record(kH200, 256, 7168, 12.25, kQuant, 3);
  r.tuned_on = "node7 device 1 (PCI 0000:1a:00.0, GPU-0123)";
  EXPECT_TRUE(db.put(r));
  auto got = db.get_exact(kH200, "quantize", kQuantProblem, 256, 0, 7168, "space-1");
  ASSERT_TRUE(got.has_value());
  auto fields = [](const TuningRecord& x) {
    return std::tie(x.gpu, x.op, x.problem_key, x.m, x.n, x.k, x.space_hash, x.best, x.best_us,
                    x.timings, x.created_at, x.tuned_on);
  };
  EXPECT_TRUE(fields(*got) == fields(r));
  const auto timings = nlohmann::json::parse(got->timings);
  ASSERT_EQ(timings.size(), 3u);
  EXPECT_EQ(timings[0]["status"], "passed");
  EXPECT_EQ(timings[0]["median_us"], 12.25);
  EXPECT_EQ(timings[1]["status"], "compile_failed");
  EXPECT_TRUE(timings[1]["median_us"].is_null());
  EXPECT_EQ(timings[1]["error"], "ptxas: too many registers");
  EXPECT_FALSE(db.get_exact(kH100, "quantize", kQuantProblem, 256, 0, 7168, "space-1"));
  EXPECT_FALSE(db.get_exact(kH200, "quantize", kQuantProblem, 256, 0, 7168, "space-2"));
  EXPECT_FALSE(db.get_exact(kH200, "quantize", kQuantProblem, 255, 0, 7168, "space-1"));

  TuningRecord fresh = quant_record(kH200, 1, 128, 1.0);
  fresh.created_at = 0;  // filled in with the current time
  db.put(fresh);
  EXPECT_GT(db.get_exact(kH200, "quantize", kQuantProblem, 1, 0, 128, "space-1")->created_at,
            1700000000);
  EXPECT_EQ(db.get_exact(kH200, "quantize", kQuantProblem, 1, 0, 128, "space-1")->tuned_on, "unknown");

  std::vector<std::pair<TuningRecord, std::string>> bad;
  auto bad_with = [&](auto edit, std::string why) {
    TuningRecord b = r;
    b.m = 999;
    edit(b);
    bad.push_back({b, why});
  };
  bad_with([](TuningRecord& b) { b.op = "dequantize"; }, "differs from the config's family");
  bad_with([](TuningRecord& b) { b.problem_key = "{}"; }, "does not match the config's problem");
  bad_with([](TuningRecord& b) { b.best_us = 0; }, "best_us");
  bad_with([](TuningRecord& b) { b.best_us = std::nan(""); }, "best_us");
  bad_with([](TuningRecord& b) { b.timings = "{\"not\": \"an array\"}"; }, "timings");
  bad_with([](TuningRecord& b) { b.timings = "[{\"config\": {}, \"status\": \"great\"}]"; },
           "status");
  bad_with([](TuningRecord& b) { b.best.params["vec"] = std::int64_t{3}; }, "vec");
  bad_with([](TuningRecord& b) { b.gpu.name.clear(); }, "gpu key");
  bad_with([](TuningRecord& b) { b.m = -1; }, "negative");
  bad_with([](TuningRecord& b) { b.tuned_on = std::string(257, 'g'); }, "tuned_on");
  bad_with([](TuningRecord& b) { b.tuned_on = "node\n7"; }, "tuned_on");
  for (const auto& [b, why] : bad)
    expect_error([&] { db.put(b); }, ErrorKind::invalid_argument, {why});
  EXPECT_EQ(db.row_count(), 2u);
}

TEST_F(TuningDbTest, FasterResultWinsAndInvalidStoredRowIsReplaced) {
  TuningDb db(path_);
  const KernelSpec other = make_quantize_spec({}, {16, 128, 4});
  auto best = [&] {
    return db.get_exact(kH200, "quantize", kQuantProblem, 64, 0, 4096, "space-1");
  };
  EXPECT_TRUE(db.put(quant_record(kH200, 64, 4096, 10.0)));
  EXPECT_FALSE(db.put(quant_record(kH200, 64, 4096, 12.0, other)));  // slower: kept
  EXPECT_FALSE(db.put(quant_record(kH200, 64, 4096, 10.0, other)));  // as fast: kept
  EXPECT_EQ(best()->best, kQuant);
  EXPECT_TRUE(db.put(quant_record(kH200, 64, 4096, 8.0, other)));  // faster: replaces
  EXPECT_EQ(best()->best, other);
  EXPECT_EQ(best()->best_us, 8.0);
  RawDb(path_).exec(
      "UPDATE results SET best_config = '{\"family\":\"quantize\"}'");  // no longer validates
  EXPECT_FALSE(best());
  EXPECT_TRUE(
      db.put(quant_record(kH200, 64, 4096, 50.0)));  // slower, but the stored row is invalid
  EXPECT_EQ(best()->best_us, 50.0);
  EXPECT_EQ(db.row_count(), 1u);
}

TEST_F(TuningDbTest, NearestMFallbackNeverCrossesGpuOrShape) {
  TuningDb db(path_);
  for (std::int64_t m : {64, 256, 1024}) db.put(quant_record(kH200, m, 4096, double(m)));
  db.put(quant_record(kH100, 130, 4096, 1.0));  // nearer to 130, but another GPU
  db.put(quant_record(kH200, 128, 2048, 1.0));  // another K
  auto nearest = [&](const GpuKey& g, std::int64_t m, std::int64_t k = 4096,
                     const char* space = "space-1") {
    auto r = db.get_nearest_m(g, "quantize", kQuantProblem, m, 0, k, space);
    return r ? r->m : -1;
  };
  EXPECT_EQ(nearest(kH200, 64), 64);
  EXPECT_EQ(nearest(kH200, 130), 64);
  EXPECT_EQ(nearest(kH200, 160), 256);  // a tie (96 either way) goes to the larger M
  EXPECT_EQ(nearest(kH200, 600), 256);
  EXPECT_EQ(nearest(kH200, 1 << 20), 1024);
  EXPECT_EQ(nearest(kH200, 1), 64);
  EXPECT_EQ(nearest(kH100, 4096), 130);
  EXPECT_EQ(nearest({"NVIDIA H20", 9, 0, 78}, 64), -1);
  EXPECT_EQ(nearest(kH200, 64, 1024), -1);
  EXPECT_EQ(nearest(kH200, 64, 4096, "space-2"), -1);
  EXPECT_EQ(db.get_nearest_m(kH200, "dequantize", kQuantProblem, 64, 0, 4096, "space-1"),
            std::nullopt);
}

TEST_F(TuningDbTest, HostileRowsAreIgnoredAndPruned) {
  {
    TuningDb db(path_);
    db.put(quant_record(kH200, 64, 4096, 10.0));
  }
  const std::string valid = spec_to_json(kQuant);
  std::string injected = valid;
  injected.replace(injected.find("\"vec\":8"), 7, "\"vec\":\"8; system(\\\"rm -rf /\\\")\"");
  const std::string other_problem = spec_to_json(make_quantize_spec({DType::fp32}, {8, 256, 2}));
  {
    RawDb raw(path_);
    raw.insert(raw_row(kH200.str(), std::int64_t{100}, "not json at all"));
    raw.insert(raw_row(kH200.str(), std::int64_t{101}, injected));
    raw.insert(raw_row(kH200.str(), std::int64_t{102}, other_problem));             // wrong problem
    raw.insert(raw_row(kH200.str(), std::int64_t{103}, std::string(100000, '[')));  // parser bomb
    raw.insert(raw_row(kH200.str(), std::int64_t{104}, valid, 5.0, "[1, 2]"));      // bad timings
    raw.insert(raw_row(kH200.str(), std::int64_t{105}, valid, -1.0));               // bad time
    raw.insert(raw_row(kH200.str(), std::string("a lot"), valid));           // m not an integer
    raw.insert(raw_row("H200 without the rest", std::int64_t{106}, valid));  // bad gpu key
    raw.insert(raw_row(kH200.str(), std::int64_t{107}, "{\"family\":\"quantize\",\"problem\":{}}"));
  }
  TuningDb db(path_);
  for (std::int64_t m = 100; m <= 107; ++m)
    EXPECT_NO_THROW(
        EXPECT_FALSE(db.get_exact(kH200, "quantize", kQuantProblem, m, 0, 4096, "space-1")))
        << m;
  // The nearest rows are all hostile: the lookup falls back to the one valid row, at m = 64.
  auto r = db.get_nearest_m(kH200, "quantize", kQuantProblem, 103, 0, 4096, "space-1");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->m, 64);
  EXPECT_EQ(db.list().size(), 1u);
  EXPECT_EQ(db.row_count(), 10u);
  EXPECT_EQ(db.prune(), 9u);
  EXPECT_EQ(db.row_count(), 1u);
  // Pruning by space: rows of the op tuned over another space go, other ops stay.
  TuningRecord deq = quant_record(kH200, 64, 4096, 3.0, make_dequantize_spec({}, {8, 256, 2}));
  db.put(deq);
  EXPECT_EQ(db.prune({{"quantize", "space-2"}}), 1u);
  EXPECT_EQ(db.row_count(), 1u);
  EXPECT_EQ(db.list()[0].op, "dequantize");
}

TEST_F(TuningDbTest, GarbageFileIsReportedAndRebuilt) {
  fs::create_directories(fs::path(path_).parent_path());
  // SQLite's header, then garbage: a damaged database (without the header, it would be some
  // other file, and left alone).
  std::ofstream(path_, std::ios::binary) << std::string("SQLite format 3", 16)
                                         << std::string(8176, '\x5a') << "this is not a database";
  for (int i = 0; i < 2; ++i)  // stays a clean error however often it is tried
    expect_error([&] { TuningDb db(path_); }, ErrorKind::io,
                 {path_, "damaged", "fp8jit db rebuild --db " + path_});
  const RebuildStats s = TuningDb::rebuild(path_);
  EXPECT_EQ(s.rows_read, 0u);
  ASSERT_FALSE(s.moved_to.empty());
  EXPECT_EQ(s.moved_to.rfind(path_ + ".corrupt-", 0), 0u) << s.moved_to;
  EXPECT_EQ(fs::file_size(s.moved_to), 8192u + 22u);  // the damaged file is kept for inspection
  EXPECT_FALSE(s.healthy);
  EXPECT_EQ(s.rows, 0u);
  TuningDb db(path_);
  EXPECT_TRUE(db.put(quant_record(kH200, 64, 4096, 10.0)));
  EXPECT_EQ(db.list().size(), 1u);
}

TEST_F(TuningDbTest, DamagedFileIsReportedAndRebuildKeepsReadableRows) {
  constexpr int kRows = 400;
  for (const bool truncate : {true, false}) {
    SCOPED_TRACE(truncate ? "truncated to half" : "a page in the middle overwritten");
    fs::remove_all(fs::path(path_).parent_path());
    {
      TuningDb db(path_);
      for (int i = 0; i < kRows; ++i) db.put(quant_record(kH200, 1 + i, 4096, 1.0 + i, kQuant, 6));
    }
    ASSERT_FALSE(fs::exists(path_ + "-wal") &&
                 fs::file_size(path_ + "-wal") > 0);  // checkpointed on close
    const auto size = fs::file_size(path_);
    ASSERT_GT(size, 64u * 1024);
    if (truncate)
      fs::resize_file(path_, size / 2);
    else
      std::fstream(path_, std::ios::in | std::ios::out | std::ios::binary).seekp(size / 8192 * 4096)
          << std::string(4096, 'Z');
    expect_error([&] { TuningDb db(path_); }, ErrorKind::io,
                 {path_, "fp8jit db rebuild --db " + path_});
    const RebuildStats s = TuningDb::rebuild(path_);
    EXPECT_FALSE(s.healthy);
    EXPECT_EQ(s.rows, s.rows_copied);
    EXPECT_GT(s.rows_copied, 0u);
    EXPECT_LT(s.rows_copied, static_cast<std::size_t>(kRows));
    EXPECT_EQ(s.rows_read, s.rows_copied + s.rows_dropped);
    TuningDb db(path_);
    const std::vector<TuningRecord> rows = db.list();
    EXPECT_EQ(rows.size(), s.rows_copied);
    for (const TuningRecord& r : rows) EXPECT_EQ(r.best_us, double(r.m));  // each row intact
    // Past a broken page in the middle, the rows behind it are found again.
    if (!truncate && !rows.empty()) EXPECT_EQ(rows.back().m, kRows);
  }
}

TEST_F(TuningDbTest, MalformedImportIsRejectedAndWritesNothing) {
  TuningDb db(path_);
  db.put(quant_record(kH200, 64, 4096, 10.0));
  db.put(quant_record(kH100, 64, 4096, 9.0));
  const std::string before = db.export_json();
  nlohmann::json good = nlohmann::json::parse(before);
  good["rows"][0]["best_us"] = 1.0;  // faster: would replace, if the import went through
  good["rows"][1]["m"] = 128;        // new key: would insert
  auto with_row = [&](auto edit) {
    nlohmann::json d = good;
    edit(d["rows"][1]);
    return d.dump();
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "not valid JSON"},
      {"[]", "expected a JSON object"},
      {R"({"format": "something else", "version": 1, "rows": []})", "format"},
      {R"({"format": "fp8jit-tuning", "version": 7, "rows": []})", "version 7"},
      {R"({"format": "fp8jit-tuning", "version": 1, "rows": {}})", "\"rows\" must be an array"},
      {with_row([](auto& r) { r["m"] = "128"; }), "rows[1].m: expected an integer"},
      {with_row([](auto& r) { r["best_us"] = nullptr; }), "rows[1].best_us: expected a number"},
      {with_row([](auto& r) { r.erase("best_us"); }), "rows[1]: missing field \"best_us\""},
      {with_row([](auto& r) { r.erase("gpu"); }), "rows[1]: missing field \"gpu\""},
      {with_row([](auto& r) { r["surprise"] = 1; }), "rows[1]: unknown field \"surprise\""},
      {with_row([](auto& r) { r["best_config"]["config"]["vec"] = 3; }), "rows[1]"},
      {with_row([](auto& r) { r["gpu"] = "H200"; }), "rows[1]"},
      {with_row([](auto& r) { r["timings"] = nlohmann::json::array({1}); }), "rows[1]: timings[0]"},
      {with_row([](auto& r) { r["op"] = "gemm"; }), "rows[1]: op"},
      {std::string(10000, '[') + std::string(10000, ']'), "nests deeper"},
  };
  for (const auto& [text, why] : cases) {
    SCOPED_TRACE(why);
    expect_error([&] { db.import_json(text); }, ErrorKind::invalid_argument, {why});
    EXPECT_EQ(db.export_json(), before);
  }
  const ImportStats s = db.import_json(good.dump());  // the unbroken version goes through
  EXPECT_EQ(s.inserted, 1u);
  EXPECT_EQ(s.replaced, 1u);
  EXPECT_EQ(db.row_count(), 3u);
}

TEST_F(TuningDbTest, ExportImportRoundTripsAndMergesFasterWins) {
  TuningDb a(path_);
  a.put(quant_record(kH200, 64, 4096, 10.0));
  a.put(quant_record(kH100, 64, 4096, 11.0));
  a.put(quant_record(kH200, 2048, 7168, 30.0,
                     make_dequantize_spec({Fp8Format::e5m2, DType::fp16}, {16, 64, 1})));
  TuningRecord g = quant_record(kH200, 4096, 7168, 800.0, make_gemm_spec({}, {128, 128, 4, 8}));
  g.n = 2112;
  a.put(g);
  const std::string text = a.export_json();
  TuningDb b(dir_ + "/other.sqlite");
  ImportStats s = b.import_json(text);
  EXPECT_EQ(s.inserted, 4u);
  EXPECT_EQ(b.export_json(), text);
  s = b.import_json(text);
  EXPECT_EQ(s.kept, 4u);
  EXPECT_EQ(s.inserted + s.replaced, 0u);
  nlohmann::json faster = nlohmann::json::parse(text);
  for (auto& row : faster["rows"])
    row["best_us"] = row["best_us"].get<double>() * (row["op"] == "gemm" ? 0.5 : 2.0);
  s = b.import_json(faster.dump());
  EXPECT_EQ(s.replaced, 1u);
  EXPECT_EQ(s.kept, 3u);
  EXPECT_EQ(b.get_exact(kH200, "gemm", problem_key(g.best), 4096, 2112, 7168, "space-1")->best_us,
            400.0);
}

TEST_F(TuningDbTest, FourProcessesWriteAtOnce) {
  constexpr int kProcs = 4, kRowsEach = 500;
  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {  // no gtest in here: report through the exit status
      ::close(gate[1]);
      char c;
      (void)!::read(gate[0], &c, 1);  // every child opens the fresh file at the same moment
      int code = 0;
      try {
        TuningDb db(path_);
        for (int i = 0; i < kRowsEach; ++i)
          db.put(quant_record(kH200, p * kRowsEach + i, 4096, 1.0 + i));
      } catch (const std::exception& e) {
        const std::string what = e.what();
        code = what.find("locked") != std::string::npos || what.find("busy") != std::string::npos
                   ? 3
                   : 2;
        std::fprintf(stderr, "child %d: %s\n", p, e.what());
      }
      ::_exit(code);
    }
    kids.push_back(pid);
  }
  ::close(gate[0]);
  ::close(gate[1]);  // go
  for (pid_t pid : kids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "3: a child saw \"database is locked\"; 2: another error";
  }
  TuningDb db(path_);
  EXPECT_EQ(db.row_count(), std::size_t{kProcs * kRowsEach});
  const std::vector<TuningRecord> rows = db.list();
  ASSERT_EQ(rows.size(), std::size_t{kProcs * kRowsEach});
  std::vector<bool> seen(kProcs * kRowsEach, false);
  for (const TuningRecord& r : rows) {
    ASSERT_LT(r.m, kProcs * kRowsEach);
    seen[r.m] = true;
    EXPECT_EQ(r.best_us, 1.0 + r.m % kRowsEach);
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), true), kProcs * kRowsEach);
}

struct CliRun {
  int status;
  std::string out, err;
};

// `fp8jit <args>` as a separate process (paths from mkdtemp need no quoting).
CliRun run_cli(const std::string& dir, const std::string& args) {
  const std::string out = dir + "/cli.out", err = dir + "/cli.err";
  const int raw = std::system(
      (std::string(FP8JIT_CLI_PATH) + " " + args + " >" + out + " 2>" + err + " </dev/null")
          .c_str());
  auto read = [](const std::string& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  return {raw != -1 && WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, read(out), read(err)};
}

TEST_F(TuningDbTest, CliCommands) {
  TuningDb(path_).put(quant_record(kH200, 64, 4096, 10.0));
  const std::string db = " --db " + path_, file = dir_ + "/export.json", bad = dir_ + "/bad.json";
  const auto has = [](const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  };
  CliRun r = run_cli(dir_, "db list" + db);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, kH200.str()) && has(r.out, spec_name(kQuant))) << r.out;
  EXPECT_TRUE(has(r.out, "by fp8jit") && has(r.out, std::string("Z ") + fp8jit_version())) << r.out;
  r = run_cli(dir_, "db show --op quantize --m 64" + db);
  EXPECT_TRUE(has(r.out, "compile_failed") && has(r.out, "ptxas: too many registers")) << r.out;
  EXPECT_TRUE(has(r.out, std::string("by fp8jit ") + fp8jit_version())) << r.out;
  EXPECT_EQ(run_cli(dir_, "db export --file " + file + db).status, 0);
  r = run_cli(dir_, "db import --file " + file + " --db " + dir_ + "/b.sqlite");
  EXPECT_TRUE(r.status == 0 && has(r.out, "1 new")) << r.out << r.err;
  EXPECT_EQ(TuningDb(dir_ + "/b.sqlite").export_json(), TuningDb(path_).export_json());
  std::ofstream(bad) << R"({"format": "fp8jit-tuning")";
  r = run_cli(dir_, "db import --file " + bad + db);
  EXPECT_TRUE(r.status == 1 && has(r.err, "not valid JSON")) << r.err;
  EXPECT_EQ(run_cli(dir_, "db frobnicate" + db).status, 2);  // a usage error
  std::ofstream(path_, std::ios::binary | std::ios::trunc)
      << std::string("SQLite format 3", 16) << std::string(4080, 'x');
  r = run_cli(dir_, "db list" + db);
  EXPECT_TRUE(r.status == 1 && has(r.err, "`fp8jit db rebuild --db " + path_ + "`")) << r.err;
  EXPECT_EQ(run_cli(dir_, "db rebuild" + db).status, 0);
  EXPECT_EQ(run_cli(dir_, "db list" + db).status, 0);
}

TEST(TuningDbKeys, GpuKeyRoundTripsAndRejectsMalformed) {
  EXPECT_EQ(kH200.str(), "NVIDIA H200|9.0|132");
  EXPECT_EQ(GpuKey::from_string("NVIDIA H200|9.0|132"), kH200);
  const GpuKey odd{"Weird|Name", 10, 3, 7};
  EXPECT_EQ(GpuKey::from_string(odd.str()), odd);
  for (const char* bad : {"", "NVIDIA H200", "NVIDIA H200|9.0", "|9.0|132", "H|9|132", "H|9.x|132",
                          "H|9.0|0", "H|9.0|-1", "H|9.0|132 ", "H|-9.0|132", "H|9.0|99999999999"})
    expect_error([&] { GpuKey::from_string(bad); }, ErrorKind::invalid_argument, {"gpu key"});
}

TEST(TuningDbKeys, CurrentGpuKeyNeedsADriver) {
  if (!driver::available()) return expect_error([] { current_gpu_key(); }, ErrorKind::driver, {});
  const GpuKey key = current_gpu_key();
  EXPECT_TRUE(!key.name.empty() && key.sm_count > 0) << key.str();
  EXPECT_EQ(GpuKey::from_string(key.str()), key);
}

TEST(TuningDbKeys, ProblemKeyIsCanonicalAndIgnoresConfig) {
  EXPECT_EQ(kQuantProblem,
            R"({"format":"e4m3","granularity":"1x128","input":"bf16","transpose":0})");
  EXPECT_EQ(problem_key(make_quantize_spec({}, {16, 512, 4})), kQuantProblem);
  EXPECT_NE(problem_key(make_quantize_spec({DType::fp16}, {8, 256, 2})), kQuantProblem);
  KernelSpec problem_only = kQuant;
  for (const char* c : {"vec", "threads", "unroll"}) problem_only.params.erase(c);
  EXPECT_EQ(problem_key(problem_only), kQuantProblem);
  const KernelSpec gemm = make_gemm_spec({}, {128, 128, 4, 8});
  EXPECT_EQ(problem_key(gemm), problem_key(make_gemm_spec({}, {64, 64, 2, 1})));
  EXPECT_EQ(nlohmann::json::parse(problem_key(gemm)).size(), 6u);
  problem_only.params["format"] = std::string("e3m4");
  expect_error([&] { problem_key(problem_only); }, ErrorKind::invalid_argument, {"format"});
}

}  // namespace
}  // namespace fp8jit
