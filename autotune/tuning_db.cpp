#include "autotune/tuning_db.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "fp8jit/error.hpp"
#include "fp8jit/tuning.hpp"
#include "generator/family.hpp"
#include "runtime/log.hpp"

namespace fp8jit {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

[[noreturn]] void invalid(const std::string& what) { throw Error(ErrorKind::invalid_argument, what); }
// Bounded and printable: text from the database or an import file may be anything.
std::string brief(std::string_view s, std::size_t max = 80) {
  std::string out;
  for (char c : s.substr(0, max)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return s.size() > max ? out + "..." : out;
}

// NOTE: the depth limit keeps hostile input from exhausting the stack in nlohmann's recursion.
json parse_json(std::string_view text, int max_depth, const std::string& what) {
  try {
    return json::parse(text, [&](int depth, json::parse_event_t, json&) {
      if (depth > max_depth) invalid(fmt::format("{} nests deeper than {} levels", what, max_depth));
      return true;
    });
  } catch (const json::exception& e) {
    invalid(fmt::format("{} is not valid JSON: {}", what, e.what()));
  }
}

void check_timings(const json& arr) {
  using enum CandidateStatus;
  static constexpr CandidateStatus kAll[] = {passed, incorrect, compile_failed, launch_failed, not_supported};
  if (!arr.is_array()) invalid(fmt::format("timings: expected a JSON array, got {}", arr.type_name()));
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const json& t = arr[i];
    const std::string at = fmt::format("timings[{}]", i);
    if (!t.is_object()) invalid(at + ": expected an object");
    if (!t.contains("config") || !t["config"].is_object()) invalid(at + ".config: expected a spec object");
    const std::string status = t.contains("status") && t["status"].is_string() ? t["status"].get<std::string>() : "";
    if (std::none_of(std::begin(kAll), std::end(kAll), [&](CandidateStatus s) { return status == to_string(s); }))
      invalid(at + ".status: expected passed, incorrect, compile_failed, launch_failed or not_supported");
    for (const char* key : {"median_us", "p20_us", "p80_us"})
      if (t.contains(key) && !t[key].is_null() && !t[key].is_number()) invalid(at + "." + key + ": expected a number");
    if (t.contains("error") && !t["error"].is_string()) invalid(at + ".error: expected a string");
  }
}

// "" when `r` may be stored and returned; otherwise why not. The one rule for put(), import,
// rebuild and every row read back.
std::string record_problem(const TuningRecord& r) {
  try {
    if (r.gpu.name.empty() || r.gpu.sm_count <= 0) return "gpu key \"" + brief(r.gpu.str()) + "\" is incomplete";
    validate_spec(r.best);
    if (r.op != r.best.family)
      return fmt::format("op \"{}\" differs from the config's family \"{}\"", brief(r.op), r.best.family);
    if (const std::string want = problem_key(r.best); r.problem_key != want)
      return fmt::format("problem_key {} does not match the config's problem {}", brief(r.problem_key), want);
    if (r.m < 0 || r.n < 0 || r.k < 0) return fmt::format("negative shape m={} n={} k={}", r.m, r.n, r.k);
    if (r.space_hash.empty()) return "space_hash is empty";
    if (!std::isfinite(r.best_us) || r.best_us <= 0) return fmt::format("best_us {} is not a positive time", r.best_us);
    check_timings(parse_json(r.timings, 6, "timings"));  // array > candidate > config > problem > value
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

std::string damaged(const std::string& path, std::string_view why) {
  return fmt::format("tuning database {} is damaged ({}); run `fp8jit db rebuild --db {}` (keeps readable rows) "
                     "or delete the file", path, why, path);
}

[[noreturn]] void fail(sqlite3* db, const std::string& path, int rc, std::string_view what) {
  const std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  if ((rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB) throw Error(ErrorKind::io, damaged(path, msg));
  throw Error(ErrorKind::io, fmt::format("tuning database {}: {} failed: {}", path, what, msg));
}

void exec(sqlite3* db, const std::string& path, const char* sql) {
  if (int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr); rc != SQLITE_OK) fail(db, path, rc, sql);
}

class Stmt {
 public:
  Stmt(sqlite3* db, const std::string& path, const std::string& sql) : db_(db), path_(path) {
    if (int rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &s_, nullptr); rc != SQLITE_OK) fail(db, path, rc, "prepare");
  }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;  // (assignment is deleted by the reference member)
  Stmt& bind(int i, std::string_view v) { return check(sqlite3_bind_text(s_, i, v.data(), int(v.size()), SQLITE_TRANSIENT)); }
  Stmt& bind(int i, std::int64_t v) { return check(sqlite3_bind_int64(s_, i, v)); }
  Stmt& bind(int i, double v) { return check(sqlite3_bind_double(s_, i, v)); }
  // Binds the primary key, in the column order of kKeyWhere.
  Stmt& bind_key(const TuningRecord& r) { return bind_key(r.gpu, r.op, r.problem_key, r.m, r.n, r.k, r.space_hash); }
  Stmt& bind_key(const GpuKey& gpu, std::string_view op, std::string_view problem, std::int64_t m, std::int64_t n,
                 std::int64_t k, std::string_view space) {
    return bind(1, gpu.str()).bind(2, op).bind(3, problem).bind(4, m).bind(5, n).bind(6, k).bind(7, space);
  }
  bool step() {  // true while there is a row
    const int rc = sqlite3_step(s_);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) fail(db_, path_, rc, "query");
    return rc == SQLITE_ROW;
  }
  int type(int c) { return sqlite3_column_type(s_, c); }
  std::int64_t i64(int c) { return sqlite3_column_int64(s_, c); }
  double f64(int c) { return sqlite3_column_double(s_, c); }
  std::string text(int c) {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, c));
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(s_, c))) : std::string();
  }

 private:
  Stmt& check(int rc) { return rc == SQLITE_OK ? *this : (fail(db_, path_, rc, "bind"), *this); }
  sqlite3* db_;
  const std::string& path_;
  sqlite3_stmt* s_ = nullptr;
};

// Rolls back unless committed, so an exception never leaves a half-written merge behind.
class WriteTxn {
 public:
  WriteTxn(sqlite3* db, const std::string& path) : db_(db), path_(path) { exec(db, path, "BEGIN IMMEDIATE"); }
  ~WriteTxn() { if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr); }
  void commit() { exec(db_, path_, "COMMIT"), done_ = true; }

 private:
  sqlite3* db_;
  const std::string& path_;
  bool done_ = false;
};

// Applied in order, each in the transaction that records its version. Never edit a released
// migration (databases in the field are at every version): add one.
constexpr std::pair<int, const char*> kMigrations[] = {
    {1, "CREATE TABLE meta (key TEXT PRIMARY KEY, value NOT NULL);"
        "CREATE TABLE results (gpu_key TEXT NOT NULL, op TEXT NOT NULL, problem_key TEXT NOT NULL,"
        " m INTEGER NOT NULL, n INTEGER NOT NULL, k INTEGER NOT NULL, space_hash TEXT NOT NULL,"
        " best_config TEXT NOT NULL, best_us REAL NOT NULL, timings TEXT NOT NULL, created_at INTEGER NOT NULL,"
        " PRIMARY KEY (gpu_key, op, problem_key, m, n, k, space_hash));"},
    // get_nearest_m reads one (gpu, op, problem, n, k) group ordered by m.
    {2, "CREATE INDEX results_by_shape ON results (gpu_key, op, problem_key, n, k, m);"},
};
static_assert(std::end(kMigrations)[-1].first == TuningDb::kSchemaVersion);

// 0 for a database without fp8jit tables yet.
int read_version(sqlite3* db, const std::string& path) {
  Stmt t(db, path, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'");
  if (!t.step() || t.i64(0) == 0) return 0;
  Stmt v(db, path, "SELECT value FROM meta WHERE key = 'schema_version'");
  if (!v.step()) throw Error(ErrorKind::io, damaged(path, "its meta table has no schema_version"));
  if (v.type(0) != SQLITE_INTEGER || v.i64(0) < 1 || v.i64(0) > INT_MAX)
    throw Error(ErrorKind::io, damaged(path, "schema_version \"" + brief(v.text(0)) + "\" is not a version"));
  return static_cast<int>(v.i64(0));
}

int refuse_newer(const std::string& path, int version) {
  if (version <= TuningDb::kSchemaVersion) return version;
  throw Error(ErrorKind::io, fmt::format("tuning database {} has schema version {}, newer than this fp8jit knows ({}):"
                                         " use a newer fp8jit, or point FP8JIT_DB at another file",
                                         path, version, TuningDb::kSchemaVersion));
}

void setup(sqlite3* db, const std::string& path) {
  sqlite3_busy_timeout(db, 10000);
  // Switching a fresh file to WAL can answer SQLITE_BUSY without calling the busy handler
  // while another process does the same, so retry for as long as the busy timeout.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int rc; (rc = sqlite3_exec(db, "PRAGMA journal_mode = WAL", nullptr, nullptr, nullptr)) != SQLITE_OK;) {
    if (((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED) || std::chrono::steady_clock::now() > deadline)
      fail(db, path, rc, "PRAGMA journal_mode = WAL");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // In WAL mode NORMAL cannot corrupt the file; a power cut may lose the last results, which a
  // cache can afford, and every commit skips an fsync.
  exec(db, path, "PRAGMA synchronous = NORMAL");
  std::string problems;
  for (Stmt q(db, path, "PRAGMA quick_check(3)"); q.step();)
    if (std::string line = q.text(0); line != "ok") problems += (problems.empty() ? "" : "; ") + brief(line, 200);
  if (!problems.empty()) throw Error(ErrorKind::io, damaged(path, "quick_check: " + problems));
  if (refuse_newer(path, read_version(db, path)) == TuningDb::kSchemaVersion) return;
  WriteTxn txn(db, path);
  const int version = refuse_newer(path, read_version(db, path));  // another process may have migrated
  for (const auto& [to, sql] : kMigrations) {
    if (to <= version) continue;
    exec(db, path, sql);
    Stmt(db, path, "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)").bind(1, std::int64_t{to}).step();
  }
  txn.commit();
}

constexpr const char* kCols =
    "rowid, gpu_key, op, problem_key, m, n, k, space_hash, best_config, best_us, timings, created_at";
constexpr const char* kKeyWhere =
    "gpu_key = ? AND op = ? AND problem_key = ? AND m = ? AND n = ? AND k = ? AND space_hash = ?";

struct RowRead {
  std::int64_t rowid = 0;
  std::optional<TuningRecord> rec;  // set when the row validates; otherwise why not, and which row
  std::string why, label;
};

RowRead read_row(Stmt& s) {
  RowRead out;
  out.rowid = s.i64(0);
  out.label = brief(fmt::format("({}, {}, m={} n={} k={})", s.text(1), s.text(2), s.text(4), s.text(5), s.text(6)), 160);
  constexpr int T = SQLITE_TEXT, I = SQLITE_INTEGER, kTypes[] = {I, T, T, T, I, I, I, T, T, SQLITE_FLOAT, T, I};
  for (int c = 1; c < 12; ++c)  // best_us (9) may also hold an integer
    if (s.type(c) != kTypes[c] && !(c == 9 && s.type(c) == I)) out.why = fmt::format("column {} has the wrong type", c);
  if (!out.why.empty()) return out;
  TuningRecord r;
  r.op = s.text(2), r.problem_key = s.text(3), r.space_hash = s.text(7), r.timings = s.text(10);
  r.m = s.i64(4), r.n = s.i64(5), r.k = s.i64(6), r.created_at = s.i64(11), r.best_us = s.f64(9);
  try {
    r.gpu = GpuKey::from_string(s.text(1));
    r.best = spec_from_json(s.text(8));
    out.why = record_problem(r);
  } catch (const std::exception& e) {
    out.why = e.what();
  }
  if (out.why.empty()) out.rec = std::move(r);
  return out;
}

void warn_ignored(const std::string& path, const RowRead& row) {
  log::at(log::warning, "tuning database {}: ignoring row {}: {}; `fp8jit db prune --db {}` removes it", path,
          row.label, brief(row.why, 300), path);
}

std::optional<TuningRecord> first_valid(Stmt& s, const std::string& path) {
  while (s.step()) {
    RowRead row = read_row(s);
    if (row.rec) return std::move(row.rec);
    warn_ignored(path, row);
  }
  return std::nullopt;
}

enum class Merge { inserted, replaced, kept };
// Faster wins; an invalid stored row always loses. Call inside a WriteTxn.
Merge merge_row(sqlite3* db, const std::string& path, const TuningRecord& r) {
  Merge kind = Merge::inserted;
  if (Stmt old(db, path, fmt::format("SELECT {} FROM results WHERE {}", kCols, kKeyWhere)); old.bind_key(r).step()) {
    const RowRead prev = read_row(old);
    if (prev.rec && prev.rec->best_us <= r.best_us) return Merge::kept;
    kind = Merge::replaced;
  }
  Stmt ins(db, path, "INSERT OR REPLACE INTO results (gpu_key, op, problem_key, m, n, k, space_hash, best_config,"
                     " best_us, timings, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  ins.bind_key(r).bind(8, spec_to_json(r.best)).bind(9, r.best_us).bind(10, r.timings).bind(11, r.created_at).step();
  return kind;
}

TuningRecord parse_import_row(const json& row, std::size_t i) {
  const std::string at = fmt::format("rows[{}]", i);
  if (!row.is_object()) invalid(fmt::format("{}: expected an object, got {}", at, row.type_name()));
  static const std::vector<std::string> kFields = {"gpu", "op", "problem_key", "m", "n", "k", "space_hash",
                                                   "best_config", "best_us", "timings", "created_at"};
  for (const auto& [key, _] : row.items())
    if (std::find(kFields.begin(), kFields.end(), key) == kFields.end())
      invalid(fmt::format("{}: unknown field \"{}\"", at, brief(key)));
  const auto get = [&](const char* name, bool (json::*is)() const noexcept, const char* what) -> const json& {
    if (!row.contains(name)) invalid(fmt::format("{}: missing field \"{}\"", at, name));
    const json& v = row[name];
    if (!(v.*is)() || (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(INT64_MAX)))
      invalid(fmt::format("{}.{}: expected {}, got {}", at, name, what, brief(v.dump(), 40)));
    return v;
  };
  const auto str = [&](const char* name) { return get(name, &json::is_string, "a string").get<std::string>(); };
  const auto integer = [&](const char* n) { return get(n, &json::is_number_integer, "an integer").get<std::int64_t>(); };
  TuningRecord r;
  try {  // library errors (gpu key, spec) do not know the row: name it
    r.gpu = GpuKey::from_string(str("gpu"));
    r.best = spec_from_json(get("best_config", &json::is_object, "a spec object").dump());
  } catch (const Error& e) {
    if (std::string_view(e.what()).rfind(at, 0) == 0) throw;
    invalid(at + ": " + e.what());
  }
  r.op = str("op"), r.problem_key = str("problem_key"), r.space_hash = str("space_hash");
  r.m = integer("m"), r.n = integer("n"), r.k = integer("k"), r.created_at = integer("created_at");
  r.best_us = get("best_us", &json::is_number, "a number").get<double>();
  r.timings = get("timings", &json::is_array, "an array").dump();
  if (std::string why = record_problem(r); !why.empty()) invalid(at + ": " + why);
  return r;
}

// Rows still readable from a damaged file, in rowid order, and its schema version (left alone
// where unreadable). A scan stops at the first broken page, so it restarts past the last good
// rowid with growing jumps to skip the damage.
std::vector<RowRead> salvage(const std::string& path, int& version) {
  std::vector<RowRead> rows;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_exec(db, "PRAGMA writable_schema = ON", nullptr, nullptr, nullptr);  // else a short file is refused
    try {
      version = read_version(db, path);
    } catch (const Error&) {  // damaged meta table: rebuild writes a fresh one
    }
    std::int64_t after = INT64_MIN, jump = 1;
    for (int attempt = 0; attempt < 24; ++attempt) {
      try {
        Stmt s(db, path, fmt::format("SELECT {} FROM results WHERE rowid > ? ORDER BY rowid", kCols));
        for (s.bind(1, after); s.step(); jump = 1) after = rows.emplace_back(read_row(s)).rowid;
        break;
      } catch (const Error&) {
        if (after == INT64_MIN) after = 0;
        if (after > INT64_MAX - jump) break;
        after += jump, jump *= 4;
      }
    }
  }
  sqlite3_close(db);
  return rows;
}

}  // namespace

std::string problem_key(const KernelSpec& spec) {
  json out = json::object();  // sorts its keys: the dump is canonical
  for (const ParamDef& def : find_family(spec.family).params) {
    if (def.is_config) continue;
    auto it = spec.params.find(def.name);
    if (it == spec.params.end()) throw_invalid(spec.family + "." + def.name, "<missing>", "a problem parameter");
    if (std::find(def.allowed.begin(), def.allowed.end(), it->second) == def.allowed.end())
      throw_invalid(spec.family + "." + def.name, param_repr(it->second), "not an allowed value");
    if (const auto* i = std::get_if<std::int64_t>(&it->second)) out[def.name] = *i;
    else out[def.name] = std::get<std::string>(it->second);
  }
  return out.dump();
}

std::string timings_to_json(const std::vector<CandidateResult>& candidates) {
  json arr = json::array();
  // A zero or non-finite time means "not timed": null, so no reader mistakes it for a time.
  auto us = [](double v) { return std::isfinite(v) && v > 0 ? json(v) : json(nullptr); };
  for (const CandidateResult& c : candidates)
    arr.push_back({{"config", json::parse(spec_to_json(c.spec))}, {"status", to_string(c.status)},
                   {"median_us", us(c.timing.median_us)}, {"p20_us", us(c.timing.p20_us)},
                   {"p80_us", us(c.timing.p80_us)}, {"error", c.error}});
  return arr.dump();
}

TuningDb::TuningDb(const std::string& path) : path_(path) {
  if (path.empty()) throw_invalid("tuning database path", "\"\"", "a file path (FP8JIT_DB)");
  std::error_code ec;
  if (const fs::path parent = fs::path(path).parent_path(); !parent.empty()) fs::create_directories(parent, ec);
  if (ec) throw Error(ErrorKind::io, fmt::format("tuning database {}: cannot create its directory: {}", path, ec.message()));
  try {  // NOMUTEX: one connection per thread
    const int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) fail(db_, path_, rc, "open");
    setup(db_, path_);
  } catch (...) {
    sqlite3_close(std::exchange(db_, nullptr));
    throw;
  }
}

TuningDb::~TuningDb() { sqlite3_close(db_); }
TuningDb::TuningDb(TuningDb&& o) noexcept : path_(std::move(o.path_)), db_(std::exchange(o.db_, nullptr)) {}
TuningDb& TuningDb::operator=(TuningDb&& o) noexcept {
  if (this == &o) return *this;
  sqlite3_close(std::exchange(db_, std::exchange(o.db_, nullptr)));
  path_ = std::move(o.path_);
  return *this;
}

int TuningDb::schema_version() const { return read_version(db_, path_); }
bool TuningDb::put(const TuningRecord& record) {
  if (std::string why = record_problem(record); !why.empty())
    invalid(fmt::format("tuning record ({}, {}, m={} n={} k={}): {}", brief(record.gpu.str()), brief(record.op),
                        record.m, record.n, record.k, why));
  TuningRecord r = record;
  if (r.created_at == 0) r.created_at = std::time(nullptr);
  WriteTxn txn(db_, path_);
  const Merge kind = merge_row(db_, path_, r);
  txn.commit();
  return kind != Merge::kept;
}

std::optional<TuningRecord> TuningDb::get_exact(const GpuKey& gpu, std::string_view op, std::string_view problem_key,
                                                std::int64_t m, std::int64_t n, std::int64_t k,
                                                std::string_view space_hash) {
  Stmt s(db_, path_, fmt::format("SELECT {} FROM results WHERE {}", kCols, kKeyWhere));
  return first_valid(s.bind_key(gpu, op, problem_key, m, n, k, space_hash), path_);
}

std::optional<TuningRecord> TuningDb::get_nearest_m(const GpuKey& gpu, std::string_view op,
                                                    std::string_view problem_key, std::int64_t m, std::int64_t n,
                                                    std::int64_t k, std::string_view space_hash) {
  Stmt s(db_, path_, fmt::format("SELECT {} FROM results WHERE gpu_key = ? AND op = ? AND problem_key = ? AND n = ?"
                                 " AND k = ? AND space_hash = ? ORDER BY abs(m - ?), m DESC", kCols));
  s.bind(1, gpu.str()).bind(2, op).bind(3, problem_key).bind(4, n).bind(5, k).bind(6, space_hash).bind(7, m);
  return first_valid(s, path_);  // an invalid nearest row falls back to the next nearest
}

std::vector<TuningRecord> TuningDb::list(const std::optional<GpuKey>& gpu) {
  Stmt s(db_, path_, fmt::format("SELECT {} FROM results{} ORDER BY gpu_key, op, problem_key, n, k, m, space_hash",
                                 kCols, gpu ? " WHERE gpu_key = ?" : ""));
  if (gpu) s.bind(1, gpu->str());
  std::vector<TuningRecord> out;
  while (std::optional<TuningRecord> r = first_valid(s, path_)) out.push_back(std::move(*r));
  return out;
}

std::size_t TuningDb::row_count() {
  Stmt s(db_, path_, "SELECT count(*) FROM results");
  return s.step() ? static_cast<std::size_t>(s.i64(0)) : 0;
}

std::size_t TuningDb::prune(const std::map<std::string, std::string>& space_hash_by_op) {
  WriteTxn txn(db_, path_);
  std::vector<std::int64_t> doomed;
  for (Stmt s(db_, path_, fmt::format("SELECT {} FROM results", kCols)); s.step();) {
    const RowRead row = read_row(s);
    auto space = row.rec ? space_hash_by_op.find(row.rec->op) : space_hash_by_op.end();
    if (!row.rec || (space != space_hash_by_op.end() && space->second != row.rec->space_hash))
      doomed.push_back(row.rowid);
  }
  for (std::int64_t rowid : doomed) Stmt(db_, path_, "DELETE FROM results WHERE rowid = ?").bind(1, rowid).step();
  txn.commit();
  return doomed.size();
}

std::string TuningDb::export_json() {
  using ojson = nlohmann::ordered_json;
  ojson rows = ojson::array();
  for (const TuningRecord& r : list())
    rows.push_back({{"gpu", r.gpu.str()}, {"op", r.op}, {"problem_key", r.problem_key}, {"m", r.m}, {"n", r.n},
                    {"k", r.k}, {"space_hash", r.space_hash}, {"best_config", ojson::parse(spec_to_json(r.best))},
                    {"best_us", r.best_us}, {"timings", ojson::parse(r.timings)}, {"created_at", r.created_at}});
  return ojson{{"format", "fp8jit-tuning"}, {"version", 1}, {"rows", std::move(rows)}}.dump(2) + "\n";
}

ImportStats TuningDb::import_json(std::string_view text) {
  // Everything is parsed and validated before the transaction starts: a bad row writes nothing.
  const json doc = parse_json(text, 12, "import");
  if (!doc.is_object()) invalid(fmt::format("import: expected a JSON object, got {}", doc.type_name()));
  if (doc.value("format", json()) != "fp8jit-tuning")
    invalid("import: \"format\" is not \"fp8jit-tuning\" (not an `fp8jit db export` file)");
  if (const json v = doc.value("version", json()); v != 1)
    invalid(fmt::format("import: export version {} is not 1, the one this fp8jit reads", brief(v.dump(), 20)));
  if (!doc.contains("rows") || !doc["rows"].is_array()) invalid("import: \"rows\" must be an array");
  std::vector<TuningRecord> records;
  for (std::size_t i = 0; i < doc["rows"].size(); ++i) records.push_back(parse_import_row(doc["rows"][i], i));
  ImportStats stats;
  WriteTxn txn(db_, path_);
  for (const TuningRecord& r : records) {
    const Merge kind = merge_row(db_, path_, r);
    ++(kind == Merge::inserted ? stats.inserted : kind == Merge::replaced ? stats.replaced : stats.kept);
  }
  txn.commit();
  return stats;
}

RebuildStats TuningDb::rebuild(const std::string& path) {
  RebuildStats stats;
  std::error_code ec;
  std::vector<RowRead> rows;
  if (fs::exists(path, ec)) {
    int version = 0;
    rows = salvage(path, version);  // before the move, so that the WAL is read under its own name
    refuse_newer(path, version);    // a newer fp8jit's database is not damaged: leave it alone
    const std::string stamp = fmt::format("{:%Y%m%dT%H%M%SZ}", fmt::gmtime(std::time(nullptr)));
    stats.moved_to = path + ".corrupt-" + stamp;
    for (int i = 1; fs::exists(stats.moved_to, ec); ++i) stats.moved_to = fmt::format("{}.corrupt-{}-{}", path, stamp, i);
    fs::rename(path, stats.moved_to, ec);
    if (!ec && fs::exists(path + "-wal")) fs::rename(path + "-wal", stats.moved_to + "-wal", ec);
    if (ec) throw Error(ErrorKind::io, fmt::format("tuning database {}: cannot move it aside: {}", path, ec.message()));
    fs::remove(path + "-shm", ec);  // the old WAL's shared-memory index; rebuilt on demand
  }
  TuningDb fresh(path);
  WriteTxn txn(fresh.db_, fresh.path_);
  for (const RowRead& row : rows)
    if (row.rec) merge_row(fresh.db_, fresh.path_, *row.rec), ++stats.rows_copied;
  txn.commit();
  stats.rows_read = rows.size();
  stats.rows_dropped = stats.rows_read - stats.rows_copied;
  return stats;
}

}  // namespace fp8jit
