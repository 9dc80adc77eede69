// The tuning database's schema: what a file must hold before fp8jit writes to it, migrations,
// and the setup of a fresh connection.
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "autotune/tuning_db_internal.hpp"

namespace fp8jit::tuning_db_detail {

namespace {

// Applied in order, each in the transaction that records its version: its SQL, then its code
// (null: none). Never edit a released migration (databases in the field are at every version):
// add one.
struct Migration {
  int to;
  const char* sql;
  void (*then)(sqlite3* db, const std::string& path);
};
constexpr Migration kMigrations[] = {
    {1,
     "CREATE TABLE meta (key TEXT PRIMARY KEY, value NOT NULL);"
     "CREATE TABLE results (gpu_key TEXT NOT NULL, op TEXT NOT NULL, problem_key TEXT NOT NULL,"
     " m INTEGER NOT NULL, n INTEGER NOT NULL, k INTEGER NOT NULL, space_hash TEXT NOT NULL,"
     " best_config TEXT NOT NULL, best_us REAL NOT NULL, timings TEXT NOT NULL,"
     " created_at INTEGER NOT NULL, PRIMARY KEY (gpu_key, op, problem_key, m, n, k, space_hash));",
     nullptr},
    // get_nearest_m reads one (gpu, op, problem, n, k) group ordered by m.
    {2, "CREATE INDEX results_by_shape ON results (gpu_key, op, problem_key, n, k, m);", nullptr},
    // Which release tuned a row (earlier rows: unknown), and space hashes without the headers'
    // bytes: rows of today's config spaces keyed the old way are re-keyed, so that no tuned row
    // of the current kernels is lost by the upgrade.
    {3, "ALTER TABLE results ADD COLUMN fp8jit_version TEXT NOT NULL DEFAULT 'unknown';",
     rekey_legacy_rows},
    // Which card measured a row: sweeps over several GPUs and hosts merge into one file.
    {4, "ALTER TABLE results ADD COLUMN tuned_on TEXT NOT NULL DEFAULT 'unknown';", nullptr},
};
static_assert(std::end(kMigrations)[-1].to == TuningDb::kSchemaVersion);

// The columns the migrations above create, in order: a table with other columns is not ours.
const std::vector<std::string> kMetaColumns = {"key", "value"};
const std::vector<std::string> kResultsColumnsBefore3 = {
    "gpu_key",    "op",          "problem_key", "m",       "n",         "k",
    "space_hash", "best_config", "best_us",     "timings", "created_at"};
const std::vector<std::string> kResultsColumnsBefore4 = [] {
  std::vector<std::string> c = kResultsColumnsBefore3;
  c.push_back("fp8jit_version");  // migration 3
  return c;
}();
const std::vector<std::string> kResultsColumns = [] {
  std::vector<std::string> c = kResultsColumnsBefore4;
  c.push_back("tuned_on");  // migration 4
  return c;
}();

bool results_columns_fit(const std::vector<std::string>& cols,
                         std::optional<std::int64_t> version) {
  if (!version)  // said below
    return cols == kResultsColumnsBefore3 || cols == kResultsColumnsBefore4 || cols == kResultsColumns;
  return cols == (*version >= 4   ? kResultsColumns
                  : *version == 3 ? kResultsColumnsBefore4
                                  : kResultsColumnsBefore3);
}

// A name from someone else's file, safe to print: non-printable bytes as \xNN, bounded.
std::string escaped(std::string_view s, std::size_t max = 40) {
  std::string out;
  for (unsigned char c : s.substr(0, max))
    out += c >= 0x20 && c < 0x7f ? std::string(1, char(c)) : fmt::format("\\x{:02x}", c);
  return s.size() > max ? out + "..." : out;
}

std::string name_list(const std::vector<std::string>& names, std::size_t max = 8) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < max; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > max) out += fmt::format(" and {} more", names.size() - max);
  return out;
}

[[noreturn]] void not_ours(const std::string& path, const std::string& what) {
  throw NotOurs(ErrorKind::io,
                fmt::format("{} is not an fp8jit tuning database ({}); point FP8JIT_DB or --db at "
                            "another file",
                            path, what));
}

// Whether the file starts with SQLite's header, read through SQLite's own descriptor: opening
// the file again would drop every SQLite lock this process holds on it when that copy closes.
// An empty file counts as SQLite (an empty database); where it cannot be read, SQLite's error
// stands.
bool has_sqlite_header(sqlite3* db) {
  sqlite3_file* file = nullptr;
  if (sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &file) != SQLITE_OK || !file ||
      !file->pMethods)
    return true;
  sqlite3_int64 size = 0;
  if (file->pMethods->xFileSize(file, &size) != SQLITE_OK || size == 0) return true;
  char head[16] = {};
  const int rc = file->pMethods->xRead(file, head, sizeof head, 0);  // a short read zero-fills
  if (rc != SQLITE_OK && rc != SQLITE_IOERR_SHORT_READ) return true;
  return std::memcmp(head, "SQLite format 3", sizeof head) == 0;  // 15 letters and a NUL
}

std::vector<std::string> columns(sqlite3* db, const std::string& path, const std::string& table) {
  std::vector<std::string> out;
  Stmt s(db, path, "SELECT name FROM pragma_table_info(?) ORDER BY cid");
  for (s.bind(1, table); s.step();) out.push_back(s.text(0));
  return out;
}

// The stored schema_version: nullopt when meta has no such row, or holds something else there.
std::optional<std::int64_t> stored_version(sqlite3* db, const std::string& path) {
  Stmt v(db, path, "SELECT value FROM meta WHERE key = 'schema_version'");
  if (!v.step() || v.type(0) != SQLITE_INTEGER) return std::nullopt;
  return v.i64(0);
}

struct SchemaObject {
  std::string type, name, table;
};

// nullopt when the objects (other than SQLite's own) are exactly an fp8jit database; otherwise
// what is wrong beyond the list of tables ("" where that list says it all).
std::optional<std::string> schema_problem(sqlite3* db, const std::string& path,
                                          const std::vector<SchemaObject>& objs,
                                          std::optional<std::int64_t> version) {
  bool meta = false, results = false;
  for (const SchemaObject& o : objs) {
    if (o.type == "table" && o.name == "meta")
      meta = true;
    else if (o.type == "table" && o.name == "results")
      results = true;
    else if (!(o.type == "index" && o.name == "results_by_shape" && o.table == "results"))
      return "";
  }
  if (!meta || !results) return meta ? "no results table" : "no meta table";
  if (columns(db, path, "meta") != kMetaColumns) return "its meta table has other columns";
  if (!results_columns_fit(columns(db, path, "results"), version))
    return "its results table has other columns";
  if (!version) return "its meta table has no schema_version";
  if (*version < 1) return fmt::format("its schema_version {} is not a version", *version);
  return std::nullopt;
}

[[noreturn]] void refuse_schema(const std::string& path, const std::vector<SchemaObject>& objs,
                                const std::string& problem) {
  std::vector<std::string> tables, others;
  for (const SchemaObject& o : objs)
    if (o.type == "table")
      tables.push_back(escaped(o.name));
    else
      others.push_back(o.type + " " + escaped(o.name));
  std::string held =
      tables.empty() ? "it holds no tables" : "it holds tables: " + name_list(tables);
  if (!others.empty()) held += "; " + name_list(others);
  not_ours(path, problem.empty() ? held : held + "; " + problem);
}

Inspection inspect_schema(sqlite3* db, const std::string& path) {
  std::vector<SchemaObject> objs;
  for (Stmt s(db, path, "SELECT type, name, tbl_name FROM sqlite_master ORDER BY rowid"); s.step();)
    if (std::string name = s.text(1); name.rfind("sqlite_", 0) != 0)  // SQLite's own
      objs.push_back({s.text(0), std::move(name), s.text(2)});
  if (objs.empty()) return {};
  std::optional<std::int64_t> version;
  const bool has_meta = std::any_of(objs.begin(), objs.end(), [](const SchemaObject& o) {
    return o.type == "table" && o.name == "meta";
  });
  if (has_meta && columns(db, path, "meta") == kMetaColumns) version = stored_version(db, path);
  // A newer fp8jit may well have other tables: its version is the better message.
  if (version && *version > TuningDb::kSchemaVersion)
    refuse_newer(path, static_cast<int>(std::min<std::int64_t>(*version, INT_MAX)));
  if (auto problem = schema_problem(db, path, objs, version)) refuse_schema(path, objs, *problem);
  return {false, static_cast<int>(*version)};
}

void switch_to_wal(sqlite3* db, const std::string& path) {
  // Switching a fresh file to WAL can answer SQLITE_BUSY without calling the busy handler
  // while another process does the same, so retry for as long as the busy timeout.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyMs);
  for (int rc; (rc = sqlite3_exec(db, "PRAGMA journal_mode = WAL", nullptr, nullptr, nullptr)) !=
               SQLITE_OK;) {
    if (((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED) ||
        std::chrono::steady_clock::now() > deadline)
      fail(db, path, rc, "PRAGMA journal_mode = WAL");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

Inspection inspect(sqlite3* db, const std::string& path) {
  try {
    return inspect_schema(db, path);
  } catch (const Damaged&) {
    // SQLite says "not a database" for damage and for text files alike: only the first is
    // fp8jit's to repair.
    if (!has_sqlite_header(db)) not_ours(path, "not an SQLite file");
    throw;
  }
}

std::string select_list(sqlite3* db, const std::string& path) {
  try {
    const std::vector<std::string> cols = columns(db, path, "results");
    if (cols == kResultsColumnsBefore3) return std::string(kColsBeforeVersionColumn) + ", 'unknown', 'unknown'";
    if (cols == kResultsColumnsBefore4) return std::string(kColsBeforeVersionColumn) + ", fp8jit_version, 'unknown'";
  } catch (const Error&) {  // a damaged schema: read as today's, what can be read
  }
  return kCols;
}

namespace {

// PATH as an SQLite file: URI ('%', '?' and '#' escaped), for SQLITE_OPEN_URI.
std::string file_uri(const std::string& path, const char* query) {
  std::string uri = "file:";
  for (char c : path)
    uri += c == '%' || c == '?' || c == '#' ? fmt::format("%{:02X}", static_cast<unsigned char>(c)) : std::string(1, c);
  return uri + query;
}

}  // namespace

void refuse_foreign(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || st.st_size == 0) return;
  sqlite3* db = nullptr;
  ConnectionCloser closer{db};
  // Any connection to a file in WAL mode, a read-only one too, creates PATH-wal and PATH-shm
  // beside it; a file that is then refused must be left as it was. Without a PATH-wal the main
  // file is the whole database and is read as immutable (no journal, no shared memory, no
  // locks); with one, another connection is using it and the two files exist already.
  struct stat wal;
  const bool has_wal = ::stat((path + "-wal").c_str(), &wal) == 0;
  const std::string uri = file_uri(path, has_wal ? "" : "?immutable=1");
  const int rc = sqlite3_open_v2(uri.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI, nullptr);
  if (rc != SQLITE_OK) fail(db, path, rc, "open");
  sqlite3_busy_timeout(db, kBusyMs);
  inspect(db, path);
}

int read_version(sqlite3* db, const std::string& path) {
  Stmt t(db, path, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'");
  if (!t.step() || t.i64(0) == 0) return 0;
  Stmt v(db, path, "SELECT value FROM meta WHERE key = 'schema_version'");
  if (!v.step()) throw Damaged(path, "its meta table has no schema_version");
  if (v.type(0) != SQLITE_INTEGER || v.i64(0) < 1 || v.i64(0) > INT_MAX)
    throw Damaged(path, "schema_version \"" + brief(v.text(0)) + "\" is not a version");
  return static_cast<int>(v.i64(0));
}

int refuse_newer(const std::string& path, int version) {
  if (version <= TuningDb::kSchemaVersion) return version;
  throw Error(ErrorKind::io,
              fmt::format("tuning database {} has schema version {}, newer than this fp8jit knows "
                          "({}): use a newer fp8jit, or point FP8JIT_DB at another file",
                          path, version, TuningDb::kSchemaVersion));
}

void quick_check(sqlite3* db, const std::string& path) {
  std::string problems;
  for (Stmt q(db, path, "PRAGMA quick_check(3)"); q.step();)
    if (std::string line = q.text(0); line != "ok")
      problems += (problems.empty() ? "" : "; ") + brief(line, 200);
  if (!problems.empty()) throw Damaged(path, "quick_check: " + problems);
}

void open_database(sqlite3* db, const std::string& path) {
  sqlite3_busy_timeout(db, kBusyMs);
  // Nothing below writes before these two have accepted the file.
  const Inspection first = inspect(db, path);
  quick_check(db, path);
  switch_to_wal(db, path);
  // In WAL mode NORMAL cannot corrupt the file; a power cut may lose the last results, which a
  // cache can afford, and every commit skips an fsync.
  exec(db, path, "PRAGMA synchronous = NORMAL");
  if (first.version == TuningDb::kSchemaVersion) return;
  WriteTxn txn(db, path);
  // Again under the write lock: another process may have migrated (or written) since.
  const int version = inspect(db, path).version;
  for (const auto& [to, sql, then] : kMigrations) {
    if (to <= version) continue;
    exec(db, path, sql);
    if (then) then(db, path);
    Stmt(db, path, "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)")
        .bind(1, std::int64_t{to})
        .step();
  }
  txn.commit();
}

}  // namespace fp8jit::tuning_db_detail
