// TuningDb::rebuild: leaves a healthy database alone and salvages a damaged one, never while
// another connection has it open.
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <climits>
#include <ctime>
#include <filesystem>
#include <utility>
#include <vector>

#include "autotune/tuning_db_internal.hpp"

namespace fp8jit {

using namespace tuning_db_detail;
namespace fs = std::filesystem;

namespace {

// Rows still readable from a damaged file, in rowid order, and its schema version (left alone
// where unreadable). A scan stops at the first broken page, so it restarts past the last good
// rowid with growing jumps to skip the damage.
std::vector<RowRead> salvage(const std::string& path, int& version) {
  std::vector<RowRead> rows;
  sqlite3* db = nullptr;
  ConnectionCloser closer{db};
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) return rows;
  // Else SQLite refuses a file shorter than its header says.
  sqlite3_exec(db, "PRAGMA writable_schema = ON", nullptr, nullptr, nullptr);
  try {
    version = read_version(db, path);
  } catch (const Error&) {  // damaged meta table: rebuild writes a fresh one
  }
  const std::string cols = select_list(db, path);
  std::int64_t after = INT64_MIN, jump = 1;
  for (int attempt = 0; attempt < 24; ++attempt) {
    try {
      Stmt s(db, path, fmt::format("SELECT {} FROM results WHERE rowid > ? ORDER BY rowid", cols));
      for (s.bind(1, after); s.step(); jump = 1) after = rows.emplace_back(read_row(s)).rowid;
      break;
    } catch (const Error&) {
      if (after == INT64_MIN) after = 0;
      if (after > INT64_MAX - jump) break;
      after += jump, jump *= 4;
    }
  }
  return rows;
}

// The row count of a healthy database; nullopt for a damaged one, with the reason in `why`.
// Another program's file, a newer schema and any other trouble (e.g. a writer holding the lock
// past the busy timeout) throw: none of them is damage, so none may be moved aside.
std::optional<std::size_t> healthy_rows(const std::string& path, std::string& why) {
  sqlite3* db = nullptr;
  ConnectionCloser closer{db};
  try {
    refuse_foreign(path);
    const int rc =
        sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) fail(db, path, rc, "open");
    sqlite3_busy_timeout(db, kBusyMs);
    const Inspection in = inspect(db, path);
    // The writers' lock: never judge a file in the middle of someone's transaction. Nothing is
    // written; the transaction rolls back.
    WriteTxn txn(db, path);
    quick_check(db, path);
    if (in.empty) return 0;
    Stmt count(db, path, "SELECT count(*) FROM results");
    return count.step() ? static_cast<std::size_t>(count.i64(0)) : 0;
  } catch (const Damaged& e) {
    why = e.why();
    return std::nullopt;
  }
}

// Moves the file (and its -wal) to PATH.corrupt-<UTC time>; returns the new name.
std::string move_aside(const std::string& path) {
  std::error_code ec;
  const std::string stamp = fmt::format("{:%Y%m%dT%H%M%SZ}", fmt::gmtime(std::time(nullptr)));
  std::string to = path + ".corrupt-" + stamp;
  for (int i = 1; fs::exists(to, ec); ++i) to = fmt::format("{}.corrupt-{}-{}", path, stamp, i);
  fs::rename(path, to, ec);
  if (!ec && fs::exists(path + "-wal", ec)) fs::rename(path + "-wal", to + "-wal", ec);
  if (ec)
    throw Error(ErrorKind::io, fmt::format("tuning database {}: cannot move it aside to {}: {}",
                                           path, to, ec.message()));
  fs::remove(path + "-shm", ec);  // the old WAL's shared-memory index; rebuilt on demand
  return to;
}

struct LockHolder {
  int fd;
  ~LockHolder() { unlock(fd); }
};

}  // namespace

RebuildStats TuningDb::rebuild(const std::string& path) {
  if (path.empty()) throw_invalid("tuning database path", "\"\"", "a file path (FP8JIT_DB)");
  check_path(path);
  RebuildStats stats;
  if (!exists(path)) {  // nothing to repair: an empty database, as any command would create
    TuningDb fresh(path);
    stats.healthy = true;
    return stats;
  }
  std::string why;
  std::optional<std::size_t> rows;
  {  // as a connection would: no other rebuild moves the file while it is checked
    bool created_lock = false;
    LockHolder shared{lock_shared(path, created_lock)};
    try {
      rows = healthy_rows(path, why);
    } catch (...) {  // someone else's file, a newer schema: as a connection, leave no trace
      if (created_lock) drop_created_lock(path, std::exchange(shared.fd, -1));
      throw;
    }
  }
  if (!rows) {
    // Moving a file that a connection has open would strand that connection's later writes in
    // the moved file, and the fresh file would never see them.
    const LockHolder exclusive{try_lock_exclusive(path)};
    if (exclusive.fd < 0)
      throw Error(ErrorKind::io,
                  fmt::format("tuning database {} is in use by another process; stop it "
                              "and run `fp8jit db rebuild` again (the file is damaged: {}; "
                              "nothing was moved)",
                              path, brief(why, 200)));
    rows = healthy_rows(path, why);  // another rebuild may have repaired it before we locked
    if (!rows) return salvage_into_fresh(path);
  }
  stats.healthy = true;
  stats.rows = *rows;
  return stats;
}

// Called with the lock file held exclusively: no connection has the file open, and none can
// open it until the fresh database is complete.
RebuildStats TuningDb::salvage_into_fresh(const std::string& path) {
  RebuildStats stats;
  int version = 0;
  // Before the move, so that the WAL is read under its own name.
  const std::vector<RowRead> rows = salvage(path, version);
  refuse_newer(path, version);  // a newer fp8jit's database is not damaged: leave it alone
  stats.moved_to = move_aside(path);
  TuningDb fresh(path, LockMode::held_by_caller);
  WriteTxn txn(fresh.db_, fresh.path_);
  for (const RowRead& row : rows) {
    if (!row.rec) continue;
    TuningRecord r = *row.rec;  // the fresh file is at today's schema: as migration 3 would
    r.space_hash = upgraded_space_hash(r.op, r.space_hash);
    merge_row(fresh.db_, fresh.path_, r), ++stats.rows_copied;
  }
  txn.commit();
  stats.rows = fresh.row_count();
  stats.rows_read = rows.size();
  stats.rows_dropped = stats.rows_read - stats.rows_copied;
  return stats;
}

}  // namespace fp8jit
