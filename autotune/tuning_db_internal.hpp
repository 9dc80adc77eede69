// Internals of TuningDb shared by its source files: SQLite helpers (statements, transactions,
// errors), the schema checks run before anything is written, the checks of the path itself and
// the sidecar lock file, and the row reading shared by queries and rebuild. Not installed.
#pragma once

#include <sqlite3.h>

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "autotune/tuning_db.hpp"
#include "fp8jit/error.hpp"

namespace fp8jit::tuning_db_detail {

// How long a connection waits for another one's lock (SQLite's busy timeout, the shared lock
// file) before it gives up.
inline constexpr int kBusyMs = 10000;

// A damaged file: the only failure rebuild may repair by moving the file aside. Everything else
// (busy, permissions, someone else's database) is a plain Error and leaves the file alone.
class Damaged : public Error {
 public:
  Damaged(const std::string& path, std::string why);
  const std::string& why() const { return why_; }

 private:
  std::string why_;
};

// Someone else's file (another program's database, or not SQLite at all): refused, and left
// exactly as it was.
class NotOurs : public Error {
 public:
  using Error::Error;
};

// Bounded and printable: text from the database or an import file may be anything.
std::string brief(std::string_view s, std::size_t max = 80);

[[noreturn]] void invalid(const std::string& what);  // Error(invalid_argument)
// Throws invalid() "WHAT is not valid JSON" or, past max_depth levels, "WHAT nests deeper": the
// limit keeps hostile input from exhausting the stack in nlohmann's recursion.
nlohmann::json parse_json(std::string_view text, int max_depth, const std::string& what);
// Bytes below 0x20 and DEL: text shown by `fp8jit db list` as it is could move a terminal's
// cursor.
bool has_control_byte(std::string_view s);

// Throws Damaged for SQLITE_CORRUPT / SQLITE_NOTADB, Error(io) naming `what` otherwise.
[[noreturn]] void fail(sqlite3* db, const std::string& path, int rc, std::string_view what);
void exec(sqlite3* db, const std::string& path, const char* sql);

class Stmt {
 public:
  Stmt(sqlite3* db, const std::string& path, const std::string& sql) : db_(db), path_(path) {
    if (int rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &s_, nullptr); rc != SQLITE_OK)
      fail(db, path, rc, "prepare");
  }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;  // (assignment is deleted by the reference member)
  Stmt& bind(int i, std::string_view v) {
    return check(sqlite3_bind_text(s_, i, v.data(), int(v.size()), SQLITE_TRANSIENT));
  }
  Stmt& bind(int i, std::int64_t v) { return check(sqlite3_bind_int64(s_, i, v)); }
  Stmt& bind(int i, double v) { return check(sqlite3_bind_double(s_, i, v)); }
  // Binds the primary key, in the column order of kKeyWhere.
  Stmt& bind_key(const TuningRecord& r) {
    return bind_key(r.gpu, r.op, r.problem_key, r.m, r.n, r.k, r.space_hash);
  }
  Stmt& bind_key(const GpuKey& gpu, std::string_view op, std::string_view problem, std::int64_t m,
                 std::int64_t n, std::int64_t k, std::string_view space) {
    return bind(1, gpu.str())
        .bind(2, op)
        .bind(3, problem)
        .bind(4, m)
        .bind(5, n)
        .bind(6, k)
        .bind(7, space);
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
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(s_, c)))
             : std::string();
  }

 private:
  Stmt& check(int rc) { return rc == SQLITE_OK ? *this : (fail(db_, path_, rc, "bind"), *this); }
  sqlite3* db_;
  const std::string& path_;
  sqlite3_stmt* s_ = nullptr;
};

// BEGIN IMMEDIATE: takes the write lock up front (waiting on the busy timeout), so writers queue
// instead of failing. Rolls back unless committed: an exception never leaves half a merge behind.
class WriteTxn {
 public:
  WriteTxn(sqlite3* db, const std::string& path) : db_(db), path_(path) {
    exec(db, path, "BEGIN IMMEDIATE");
  }
  ~WriteTxn() {
    if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  WriteTxn(const WriteTxn&) = delete;
  void commit() { exec(db_, path_, "COMMIT"), done_ = true; }

 private:
  sqlite3* db_;
  const std::string& path_;
  bool done_ = false;
};

// Closes a connection on every path out of a scope.
struct ConnectionCloser {
  sqlite3*& db;
  ~ConnectionCloser() { sqlite3_close(db); }
};

// --- The schema (tuning_db_schema.cpp) ---

struct Inspection {
  bool empty = true;  // no tables at all (a zero-length file too): fp8jit may adopt it
  int version = 0;    // the stored schema_version; 0 when empty
};
// Reads sqlite_master and writes nothing. Throws Error(io) for a file that is not fp8jit's
// (another program's tables, or not an SQLite file) or was written by a newer fp8jit, and
// Damaged where SQLite cannot read it.
Inspection inspect(sqlite3* db, const std::string& path);
// inspect() on a read-only connection of its own, for an existing non-empty file: unlike a
// read-write one, it never checkpoints another program's WAL into its database on close.
void refuse_foreign(const std::string& path);
// 0 for a database without fp8jit tables yet.
int read_version(sqlite3* db, const std::string& path);
int refuse_newer(const std::string& path, int version);
// Throws Damaged unless PRAGMA quick_check says ok.
void quick_check(sqlite3* db, const std::string& path);
// A fresh connection's setup: refuses foreign and damaged files before writing anything, then
// switches to WAL and migrates an older (or empty) database.
void open_database(sqlite3* db, const std::string& path);

// --- The path and its lock file (tuning_db_file.cpp) ---

// Throws Error(io) for a path that cannot be a database (a directory, a FIFO, a file or a folder
// that cannot be written, a symbolic link to nothing), before anything opens it. Creates missing
// parent folders.
void check_path(const std::string& path);
// flock(2) on PATH.lock: every connection holds it shared, rebuild exclusively. Returns the
// descriptor that holds it; close it to release. `created`: whether this call made PATH.lock.
// A lock taken on a PATH.lock that was removed meanwhile (drop_created_lock) is taken again on
// the new one.
int lock_shared(const std::string& path, bool& created);
// For a file that was refused: closes `fd` (this process's lock on the PATH.lock it created) and
// removes PATH.lock when no one else holds it, so that a refusal leaves nothing beside the file.
void drop_created_lock(const std::string& path, int fd);
// -1 when another connection holds the lock.
int try_lock_exclusive(const std::string& path);
void unlock(int fd);

// The select list of a file's results table, in the order read_row reads: a file from before
// migration 3 (salvaged as it is) has no fp8jit_version column, one from before migration 4 no
// tuned_on ('unknown' stands in for each); kCols where that cannot be read.
std::string select_list(sqlite3* db, const std::string& path);

// --- Space hashes (tuning_db_space.cpp) ---

// The space hash of releases before generations: the config space and the hash of the embedded
// device headers (HeaderSet::hash), so that any edit of a template orphaned every tuned row.
std::string legacy_space_hash(const FamilyDef& family, std::uint64_t headers_hash);
// `hash` re-keyed: today's space hash where `hash` is the legacy hash of op's config space as it
// is now, with the headers of this build or of the last builds keyed that way (their kernels are
// the ones this build makes); `hash` itself otherwise (another space: it stays orphaned).
std::string upgraded_space_hash(std::string_view op, const std::string& hash);
// Migration 3's second half, inside its transaction: re-keys every such row. Idempotent.
void rekey_legacy_rows(sqlite3* db, const std::string& path);

// --- Rows (tuning_db.cpp) ---

// "" when `r` may be stored and returned; otherwise why not. The one rule for put(), import,
// rebuild and every row read back.
std::string record_problem(const TuningRecord& r);

inline constexpr std::string_view kColsBeforeVersionColumn =
    "rowid, gpu_key, op, problem_key, m, n, k, space_hash, best_config, best_us, timings, "
    "created_at";
inline const std::string kCols = std::string(kColsBeforeVersionColumn) + ", fp8jit_version, tuned_on";

struct RowRead {
  std::int64_t rowid = 0;
  std::optional<TuningRecord> rec;  // set when the row validates; otherwise why not, which row
  std::string why, label;
};
// The current row of a statement that selects kCols.
RowRead read_row(Stmt& s);

enum class Merge { inserted, replaced, kept };
// Faster wins; an invalid stored row always loses. Call inside a WriteTxn.
Merge merge_row(sqlite3* db, const std::string& path, const TuningRecord& r);

}  // namespace fp8jit::tuning_db_detail
