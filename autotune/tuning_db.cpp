#include "autotune/tuning_db.hpp"

#include <fmt/format.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "autotune/tuning_db_internal.hpp"
#include "common/file_io.hpp"
#include "common/log.hpp"
#include "fp8jit/error.hpp"
#include "fp8jit/fp8jit.h"
#include "fp8jit/tuning.hpp"
#include "generator/family.hpp"

namespace fp8jit {

using nlohmann::json;

namespace tuning_db_detail {

namespace {

std::string damaged_message(const std::string& path, std::string_view why) {
  return fmt::format(
      "tuning database {} is damaged ({}); run `fp8jit db rebuild --db {}` (keeps "
      "readable rows) or delete the file",
      path, why, path);
}

}  // namespace

Damaged::Damaged(const std::string& path, std::string why)
    : Error(ErrorKind::io, damaged_message(path, why)), why_(std::move(why)) {}

std::string brief(std::string_view s, std::size_t max) {
  std::string out;
  for (char c : s.substr(0, max)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return s.size() > max ? out + "..." : out;
}

void fail(sqlite3* db, const std::string& path, int rc, std::string_view what) {
  const std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  if ((rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB) throw Damaged(path, msg);
  throw Error(ErrorKind::io, fmt::format("tuning database {}: {} failed: {}", path, what, msg));
}

void exec(sqlite3* db, const std::string& path, const char* sql) {
  if (int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr); rc != SQLITE_OK)
    fail(db, path, rc, sql);
}

void invalid(const std::string& what) {
  throw Error(ErrorKind::invalid_argument, what);
}

json parse_json(std::string_view text, int max_depth, const std::string& what) {
  try {
    return json::parse(text, [&](int depth, json::parse_event_t, json&) {
      if (depth > max_depth)
        invalid(fmt::format("{} nests deeper than {} levels", what, max_depth));
      return true;
    });
  } catch (const json::exception& e) {
    invalid(fmt::format("{} is not valid JSON: {}", what, e.what()));
  }
}

bool has_control_byte(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
}

}  // namespace tuning_db_detail

using namespace tuning_db_detail;

namespace {

void check_timings(const json& arr) {
  using enum CandidateStatus;
  static constexpr CandidateStatus kAll[] = {passed, incorrect, compile_failed, launch_failed,
                                             not_supported};
  if (!arr.is_array())
    invalid(fmt::format("timings: expected a JSON array, got {}", arr.type_name()));
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const json& t = arr[i];
    const std::string at = fmt::format("timings[{}]", i);
    if (!t.is_object()) invalid(at + ": expected an object");
    if (!t.contains("config") || !t["config"].is_object())
      invalid(at + ".config: expected a spec object");
    const std::string status =
        t.contains("status") && t["status"].is_string() ? t["status"].get<std::string>() : "";
    if (std::none_of(std::begin(kAll), std::end(kAll),
                     [&](CandidateStatus s) { return status == to_string(s); }))
      invalid(
          at +
          ".status: expected passed, incorrect, compile_failed, launch_failed or not_supported");
    for (const char* key : {"median_us", "p20_us", "p80_us"})
      if (t.contains(key) && !t[key].is_null() && !t[key].is_number())
        invalid(at + "." + key + ": expected a number");
    if (t.contains("error") && !t["error"].is_string()) invalid(at + ".error: expected a string");
  }
}

// Shown by `fp8jit db list` as it is, so nothing that could move a terminal's cursor.
bool is_version(std::string_view v) {
  return !v.empty() && v.size() <= 64 && std::all_of(v.begin(), v.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           std::string_view(".-+_").find(c) != std::string_view::npos;
  });
}

// The end of year 9999 in unix seconds: `fp8jit db list` shows created_at as a calendar date.
constexpr std::int64_t kLastTime = 253402300799;

bool is_grouped_gemm(const KernelSpec& spec) {
  return spec.family == "gemm" && gemm_problem_of(spec).layout != GemmLayout::dense;
}

// The key a row of `r.best` must carry: its problem_key and, for a grouped gemm, the group count
// that the row's own key names (any count is a valid key; it must be there and well formed).
std::string expected_problem_key(const TuningRecord& r) {
  if (!is_grouped_gemm(r.best)) return problem_key(r.best);
  const json key = parse_json(r.problem_key, 2, "problem_key");
  const auto groups = key.is_object() ? key.find("groups") : key.end();
  if (groups == key.end() || !groups->is_number_integer())
    invalid(fmt::format(
        "problem_key {} of a grouped gemm ({}) lacks its group count (\"groups\": an integer)",
        brief(r.problem_key),
        to_string(gemm_problem_of(r.best).layout)));
  return grouped_problem_key(r.best, groups->get<std::int64_t>());
}

}  // namespace

std::string tuning_db_detail::record_problem(const TuningRecord& r) {
  try {
    GpuKey::from_string(r.gpu.str());  // complete, and no control bytes
    validate_spec(r.best);
    if (r.op != r.best.family)
      return fmt::format("op \"{}\" differs from the config's family \"{}\"", brief(r.op),
                         r.best.family);
    if (const std::string want = expected_problem_key(r); r.problem_key != want)
      return fmt::format("problem_key {} does not match the config's problem {}",
                         brief(r.problem_key), want);
    if (r.m < 0 || r.n < 0 || r.k < 0)
      return fmt::format("negative shape m={} n={} k={}", r.m, r.n, r.k);
    if (r.space_hash.empty()) return "space_hash is empty";
    if (has_control_byte(r.space_hash))
      return "space_hash \"" + printable(r.space_hash, 80) + "\" holds control bytes";
    if (r.created_at < 0 || r.created_at > kLastTime)
      return fmt::format("created_at {} is not a time from 1970 to 9999 (0 to {} unix seconds)",
                         r.created_at, kLastTime);
    if (!is_version(r.fp8jit_version))
      return fmt::format(
          "fp8jit_version \"{}\" is not a version (1 to 64 letters, digits, '.', "
          "'-', '+' or '_')",
          brief(r.fp8jit_version, 40));
    if (r.tuned_on.empty() || r.tuned_on.size() > 256 || has_control_byte(r.tuned_on))
      return fmt::format("tuned_on \"{}\" does not name a GPU (1 to 256 bytes, no control bytes)",
                         printable(r.tuned_on, 60));
    if (!std::isfinite(r.best_us) || r.best_us <= 0)
      return fmt::format("best_us {} is not a positive time", r.best_us);
    check_timings(
        parse_json(r.timings, 6, "timings"));  // array > candidate > config > problem > value
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

namespace {

constexpr const char* kKeyWhere =
    "gpu_key = ? AND op = ? AND problem_key = ? AND m = ? AND n = ? AND k = ? AND space_hash = ?";

}  // namespace

RowRead tuning_db_detail::read_row(Stmt& s) {
  RowRead out;
  out.rowid = s.i64(0);
  out.label = brief(fmt::format("({}, {}, m={} n={} k={})", s.text(1), s.text(2), s.text(4),
                                s.text(5), s.text(6)),
                    160);
  constexpr int T = SQLITE_TEXT, I = SQLITE_INTEGER,
                kTypes[] = {I, T, T, T, I, I, I, T, T, SQLITE_FLOAT, T, I, T, T};
  for (int c = 1; c < 14; ++c)  // best_us (9) may also hold an integer
    if (s.type(c) != kTypes[c] && !(c == 9 && s.type(c) == I))
      out.why = fmt::format("column {} has the wrong type", c);
  if (!out.why.empty()) return out;
  TuningRecord r;
  r.op = s.text(2), r.problem_key = s.text(3), r.space_hash = s.text(7), r.timings = s.text(10);
  r.m = s.i64(4), r.n = s.i64(5), r.k = s.i64(6), r.created_at = s.i64(11), r.best_us = s.f64(9);
  r.fp8jit_version = s.text(12);
  r.tuned_on = s.text(13);
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

namespace {

void warn_ignored(const std::string& path, const RowRead& row) {
  log::at(log::warning,
          "tuning database {}: ignoring row {}: {}; `fp8jit db prune --db {}` removes it", path,
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

}  // namespace

Merge tuning_db_detail::merge_row(sqlite3* db, const std::string& path, const TuningRecord& r) {
  Merge kind = Merge::inserted;
  if (Stmt old(db, path, fmt::format("SELECT {} FROM results WHERE {}", kCols, kKeyWhere));
      old.bind_key(r).step()) {
    const RowRead prev = read_row(old);
    if (prev.rec && prev.rec->best_us <= r.best_us) return Merge::kept;
    kind = Merge::replaced;
  }
  Stmt ins(
      db, path,
      "INSERT OR REPLACE INTO results (gpu_key, op, problem_key, m, n, k, space_hash, best_config,"
      " best_us, timings, created_at, fp8jit_version, tuned_on)"
      " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  ins.bind_key(r)
      .bind(8, spec_to_json(r.best))
      .bind(9, r.best_us)
      .bind(10, r.timings)
      .bind(11, r.created_at)
      .bind(12, r.fp8jit_version)
      .bind(13, r.tuned_on)
      .step();
  return kind;
}

std::string problem_key(const KernelSpec& spec) {
  json out = json::object();  // sorts its keys: the dump is canonical
  for (const ParamDef& def : find_family(spec.family).params) {
    if (def.is_config) continue;
    auto it = spec.params.find(def.name);
    if (it == spec.params.end())
      throw_invalid(spec.family + "." + def.name, "<missing>", "a problem parameter");
    if (std::find(def.allowed.begin(), def.allowed.end(), it->second) == def.allowed.end())
      throw_invalid(spec.family + "." + def.name, param_repr(it->second), "not an allowed value");
    if (elided(def, it->second)) continue;
    if (const auto* i = std::get_if<std::int64_t>(&it->second))
      out[def.name] = *i;
    else
      out[def.name] = std::get<std::string>(it->second);
  }
  return out.dump();
}

std::string grouped_problem_key(const KernelSpec& spec, std::int64_t groups) {
  if (!is_grouped_gemm(spec))
    throw_invalid("layout", spec.family == "gemm" ? "dense" : spec.family,
                  "grouped_problem_key is for gemm specs of the contiguous or masked layout; dense "
                  "ones use problem_key");
  if (groups < 1 || groups > std::numeric_limits<std::int32_t>::max())
    throw_invalid("groups", std::to_string(groups), "must be in [1, 2^31-1]");
  json out = json::parse(problem_key(spec));
  out["groups"] = groups;
  return out.dump();
}

std::string timings_to_json(const std::vector<CandidateResult>& candidates) {
  json arr = json::array();
  // A zero or non-finite time means "not timed": null, so no reader mistakes it for a time.
  auto us = [](double v) { return std::isfinite(v) && v > 0 ? json(v) : json(nullptr); };
  for (const CandidateResult& c : candidates)
    arr.push_back({{"config", json::parse(spec_to_json(c.spec))},
                   {"status", to_string(c.status)},
                   {"median_us", us(c.timing.median_us)},
                   {"p20_us", us(c.timing.p20_us)},
                   {"p80_us", us(c.timing.p80_us)},
                   {"error", c.error}});
  return arr.dump();
}

TuningDb::TuningDb(const std::string& path) : TuningDb(path, LockMode::shared) {}

// Nothing touches the file before the shared lock is held: a rebuild cannot move it from under
// this connection, nor can this one reach a half-rebuilt file.
TuningDb::TuningDb(const std::string& path, LockMode lock) : path_(path) {
  if (path.empty()) throw_invalid("tuning database path", "\"\"", "a file path (FP8JIT_DB)");
  check_path(path);
  bool created_lock = false;
  if (lock == LockMode::shared) lock_fd_ = lock_shared(path, created_lock);
  try {
    refuse_foreign(path);
    // NOMUTEX: one connection per thread.
    const int rc =
        sqlite3_open_v2(path.c_str(), &db_,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) fail(db_, path_, rc, "open");
    open_database(db_, path_);
  } catch (...) {
    // A refused file (someone else's, damaged, newer) is left with nothing beside it that this
    // process made. The connection closes first, as in close().
    sqlite3_close(std::exchange(db_, nullptr));
    if (created_lock) drop_created_lock(path, std::exchange(lock_fd_, -1));
    close();
    throw;
  }
}

// The connection closes before the lock goes: a rebuild waiting for the lock must not move the
// file while this connection could still write to it.
TuningDb::~TuningDb() {
  close();
}
void TuningDb::close() noexcept {
  sqlite3_close(std::exchange(db_, nullptr));
  unlock(std::exchange(lock_fd_, -1));
}
TuningDb::TuningDb(TuningDb&& o) noexcept
    : path_(std::move(o.path_)),
      db_(std::exchange(o.db_, nullptr)),
      lock_fd_(std::exchange(o.lock_fd_, -1)) {}
TuningDb& TuningDb::operator=(TuningDb&& o) noexcept {
  if (this == &o) return *this;
  close();
  db_ = std::exchange(o.db_, nullptr);
  lock_fd_ = std::exchange(o.lock_fd_, -1);
  path_ = std::move(o.path_);
  return *this;
}

bool TuningDb::exists(const std::string& path) {
  struct stat st;
  return !path.empty() && ::lstat(path.c_str(), &st) == 0;
}

int TuningDb::schema_version() const {
  return read_version(db_, path_);
}
bool TuningDb::put(const TuningRecord& record) {
  TuningRecord r = record;
  if (r.created_at == 0) r.created_at = std::time(nullptr);
  if (r.fp8jit_version.empty()) r.fp8jit_version = fp8jit_version();
  if (r.tuned_on.empty()) r.tuned_on = "unknown";
  if (std::string why = record_problem(r); !why.empty())
    invalid(fmt::format("tuning record ({}, {}, m={} n={} k={}): {}", brief(r.gpu.str()),
                        brief(r.op), r.m, r.n, r.k, why));
  WriteTxn txn(db_, path_);
  const Merge kind = merge_row(db_, path_, r);
  txn.commit();
  return kind != Merge::kept;
}

std::optional<TuningRecord> TuningDb::get_exact(const GpuKey& gpu, std::string_view op,
                                                std::string_view problem_key, std::int64_t m,
                                                std::int64_t n, std::int64_t k,
                                                std::string_view space_hash) {
  Stmt s(db_, path_, fmt::format("SELECT {} FROM results WHERE {}", kCols, kKeyWhere));
  return first_valid(s.bind_key(gpu, op, problem_key, m, n, k, space_hash), path_);
}

std::optional<TuningRecord> TuningDb::get_nearest_m(const GpuKey& gpu, std::string_view op,
                                                    std::string_view problem_key, std::int64_t m,
                                                    std::int64_t n, std::int64_t k,
                                                    std::string_view space_hash) {
  Stmt s(db_, path_,
         fmt::format(
             "SELECT {} FROM results WHERE gpu_key = ? AND op = ? AND problem_key = ? AND n = ?"
             " AND k = ? AND space_hash = ? ORDER BY abs(m - ?), m DESC",
             kCols));
  s.bind(1, gpu.str())
      .bind(2, op)
      .bind(3, problem_key)
      .bind(4, n)
      .bind(5, k)
      .bind(6, space_hash)
      .bind(7, m);
  return first_valid(s, path_);  // an invalid nearest row falls back to the next nearest
}

std::vector<TuningRecord> TuningDb::list(const std::optional<GpuKey>& gpu) {
  Stmt s(
      db_, path_,
      fmt::format("SELECT {} FROM results{} ORDER BY gpu_key, op, problem_key, n, k, m, space_hash",
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

namespace {

// An empty space hash (or one no row can have) would delete every row of the op.
void check_prune_spaces(const std::map<std::string, std::string>& space_hash_by_op) {
  for (const auto& [op, space] : space_hash_by_op) {
    if (!space.empty() && !has_control_byte(space)) continue;
    const std::string what =
        space.empty() ? "empty" : "\"" + printable(space, 80) + "\", which holds control bytes";
    invalid(
        fmt::format("prune: the space hash to keep for op \"{}\" is {}; pass the space whose "
                    "rows stay, e.g. tuning_space_hash(\"{}\")",
                    printable(op, 40), what, printable(op, 40)));
  }
}

}  // namespace

std::size_t TuningDb::prune(const std::map<std::string, std::string>& space_hash_by_op) {
  check_prune_spaces(space_hash_by_op);
  WriteTxn txn(db_, path_);
  std::vector<std::int64_t> doomed;
  for (Stmt s(db_, path_, fmt::format("SELECT {} FROM results", kCols)); s.step();) {
    const RowRead row = read_row(s);
    auto space = row.rec ? space_hash_by_op.find(row.rec->op) : space_hash_by_op.end();
    if (!row.rec || (space != space_hash_by_op.end() && space->second != row.rec->space_hash))
      doomed.push_back(row.rowid);
  }
  for (std::int64_t rowid : doomed)
    Stmt(db_, path_, "DELETE FROM results WHERE rowid = ?").bind(1, rowid).step();
  txn.commit();
  return doomed.size();
}

}  // namespace fp8jit
