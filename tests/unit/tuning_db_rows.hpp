// Rows, raw SQLite access and error checks shared by the tuning database tests.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "autotune/tuning_db.hpp"
#include "fp8jit/error.hpp"
#include "fp8jit/tuning.hpp"

namespace fp8jit::tuning_rows {

using Value = std::variant<std::int64_t, double, std::string>;

inline const GpuKey kH200{"NVIDIA H200", 9, 0, 132};
inline const GpuKey kH100{"NVIDIA H100 80GB HBM3", 9, 0, 132};
inline const KernelSpec kQuant = make_quantize_spec({}, {8, 256, 2});
inline const std::string kQuantProblem = problem_key(kQuant);

// A sweep whose one candidate, `best`, passed in `us` microseconds: what store_gemm_result keeps.
inline TuneResult passed_winner(const KernelSpec& best, double us) {
  TuneResult r;
  CandidateResult c;
  c.spec = best;
  c.status = CandidateStatus::passed;
  c.timing.median_us = us;
  r.candidates = {c};
  r.best = 0;
  return r;
}

// Raw access, as another program (or an attacker) would write the file.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK) << path;
  }
  ~RawDb() { sqlite3_close(db_); }
  void exec(const std::string& sql) {
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK)
        << (err ? err : "") << "\n"
        << sql;
    sqlite3_free(err);
  }
  std::string scalar(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr), SQLITE_OK) << sql;
    std::string out = "<none>";
    if (s && sqlite3_step(s) == SQLITE_ROW)
      out = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    return out;
  }
  // gpu_key, op, problem_key, m, n, k, space_hash, best_config, best_us, timings, created_at
  // and, optionally, fp8jit_version (schema 3; without it the column's default, "unknown").
  void insert(const std::vector<Value>& v) {
    static const char* const kNames[] = {"gpu_key", "op",      "problem_key", "m",
                                         "n",       "k",       "space_hash",  "best_config",
                                         "best_us", "timings", "created_at",  "fp8jit_version"};
    ASSERT_LE(v.size(), std::size(kNames));
    std::string cols, params;
    for (std::size_t i = 0; i < v.size(); ++i)
      cols += std::string(i ? ", " : "") + kNames[i], params += i ? ", ?" : "?";
    sqlite3_stmt* s = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(
                  db_, ("INSERT INTO results (" + cols + ") VALUES (" + params + ")").c_str(), -1,
                  &s, nullptr),
              SQLITE_OK)
        << sqlite3_errmsg(db_);
    for (int i = 0; i < static_cast<int>(v.size()); ++i) {
      if (auto* n = std::get_if<std::int64_t>(&v[i]))
        sqlite3_bind_int64(s, i + 1, *n);
      else if (auto* d = std::get_if<double>(&v[i]))
        sqlite3_bind_double(s, i + 1, *d);
      else
        sqlite3_bind_text(s, i + 1, std::get<std::string>(v[i]).c_str(), -1, SQLITE_TRANSIENT);
    }
    EXPECT_EQ(sqlite3_step(s), SQLITE_DONE) << sqlite3_errmsg(db_);
    sqlite3_finalize(s);
  }

 private:
  sqlite3* db_ = nullptr;
};

// Migration 1, written out by hand: what a database from the first release holds.
inline constexpr const char* kV1Schema =
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value NOT NULL);"
    "CREATE TABLE results (gpu_key TEXT NOT NULL, op TEXT NOT NULL, problem_key TEXT NOT NULL,"
    " m INTEGER NOT NULL, n INTEGER NOT NULL, k INTEGER NOT NULL, space_hash TEXT NOT NULL,"
    " best_config TEXT NOT NULL, best_us REAL NOT NULL, timings TEXT NOT NULL, created_at INTEGER "
    "NOT NULL,"
    " PRIMARY KEY (gpu_key, op, problem_key, m, n, k, space_hash));";
// Migrations 1 and 2: what the releases before fp8jit_version (schema 2) left behind.
inline const std::string kV2Schema =
    std::string(kV1Schema) +
    "CREATE INDEX results_by_shape ON results (gpu_key, op, problem_key, n, k, m);"
    "INSERT INTO meta VALUES ('schema_version', 2);";

inline TuningRecord quant_record(const GpuKey& gpu, std::int64_t m, std::int64_t k, double us,
                                 const KernelSpec& best = kQuant, int candidates = 2) {
  TuningRecord r;
  r.gpu = gpu, r.op = best.family, r.problem_key = problem_key(best);
  r.m = m, r.n = 0, r.k = k, r.space_hash = "space-1", r.best = best, r.best_us = us,
  r.created_at = 1700000000;
  std::vector<CandidateResult> c;
  c.push_back({best, CandidateStatus::passed, {us, us * 0.9, us * 1.2}, ""});
  for (int i = 1; i < candidates; ++i)
    c.push_back({make_quantize_spec({}, {4, 128, 1}),
                 CandidateStatus::compile_failed,
                 {},
                 "ptxas: too many registers"});
  r.timings = timings_to_json(c);
  return r;
}

inline std::vector<Value> raw_row(const std::string& gpu, Value m, const std::string& config,
                                  double us = 5.0, const std::string& timings = "[]",
                                  const std::string& problem = kQuantProblem,
                                  const std::string& space = "space-1") {
  return {gpu,
          std::string("quantize"),
          problem,
          m,
          std::int64_t{0},
          std::int64_t{4096},
          space,
          config,
          us,
          timings,
          std::int64_t{1}};
}

template <class F>
void expect_error(F&& f, ErrorKind kind, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(kind)) << e.what();
    for (const auto& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << n << " not in: " << e.what();
  }
}

// An `fp8jit db export` document holding `rows` in export version 1 (releases before the
// fp8jit_version column), written by hand so that imports of older exports stay tested.
inline std::string export_doc(const std::vector<TuningRecord>& rows) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const TuningRecord& r : rows)
    out.push_back({{"gpu", r.gpu.str()},
                   {"op", r.op},
                   {"problem_key", r.problem_key},
                   {"m", r.m},
                   {"n", r.n},
                   {"k", r.k},
                   {"space_hash", r.space_hash},
                   {"best_config", nlohmann::ordered_json::parse(spec_to_json(r.best))},
                   {"best_us", r.best_us},
                   {"timings", nlohmann::ordered_json::parse(r.timings)},
                   {"created_at", r.created_at}});
  return nlohmann::ordered_json{
      {"format", "fp8jit-tuning"}, {"version", 1}, {"rows", std::move(out)}}
      .dump();
}

// The file's bytes ("" when it cannot be read).
inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace fp8jit::tuning_rows
