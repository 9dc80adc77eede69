// TuningDb: the SQLite database of autotuning results (FP8JIT_DB, default
// <cache_dir>/tuning.sqlite), shared by every process and thread that points at the same file.
//
// One row per (gpu_key, op, problem_key, m, n, k, space_hash): the fastest config found and the
// timing of every candidate that was tried. Nothing read from the file is trusted: a row is only
// returned when it would be accepted by put() today (its config parses and validates against
// the current config space, matches the row's op and problem, and its timings are well formed).
// Other rows are skipped with a warning and removed by prune() (`fp8jit db prune`).
//
// Concurrency: one TuningDb is one SQLite connection and is NOT thread-safe: use one per thread
// (or guard it). Any number of connections, in any number of processes, may use one file at
// once: the database runs in WAL mode (readers never block the writer), writes take the write
// lock up front (BEGIN IMMEDIATE) so they queue instead of failing, and a busy connection waits
// up to 10 s before giving up. Every connection also holds a shared flock(2) on the sidecar file
// PATH.lock for its whole life (a separate file: closing any descriptor of the database itself
// would drop SQLite's fcntl locks on it); rebuild takes it exclusively.
//
// Safety: nothing is written to a file before it is known to be fp8jit's. The path is checked
// first (a directory, a FIFO, a socket or a device is refused without opening it; so are a file
// or folder this process cannot write, since WAL mode creates PATH-wal and PATH-shm beside it,
// and a symbolic link to nothing, whose target SQLite would create wherever it points).
// Then the file's tables are read: an empty database (or a zero-length file) is adopted, one
// holding exactly fp8jit's tables is used, anything else (another program's database, a file
// that is not SQLite at all) throws Error(io) "PATH is not an fp8jit tuning database (...)" and
// the file stays byte-identical, with nothing left beside it. On that and every other refusal (a
// newer schema, a damaged file) a PATH.lock that the refused connection made is removed again,
// unless another connection holds it by then.
//
// Rebuild: a healthy database is left alone (RebuildStats::healthy). A damaged one is moved
// aside only while no connection anywhere has it open, and the fresh one is complete before any
// connection can open it; a file that is not an fp8jit database is never moved.
//
// Failures: a damaged file (SQLite cannot read it, or PRAGMA quick_check fails) throws
// Error(ErrorKind::io) naming the file and the way out (`fp8jit db rebuild --db PATH`, or delete
// the file); a database written by a newer fp8jit throws Error(io) naming the file and its
// schema version. Bad records passed in (put, import_json) throw Error(invalid_argument).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "autotune/gpu_key.hpp"
#include "fp8jit/kernel_spec.hpp"

struct sqlite3;

namespace fp8jit {

struct FamilyDef;  // generator/family.hpp

// A row's space_hash: identifies the candidate set it was tuned over, by the family's config
// space (its name, parameters and allowed values) and its kernel generation
// (FamilyDef::generation). Not by the bytes of the device headers: editing a template keeps every
// tuned row, and a database exported by one release is used by the next, until someone bumps the
// generation. Rows of another space are not used (re-tuned) and `fp8jit db prune` removes them.
std::string tuning_space_hash(const FamilyDef& family);
std::string tuning_space_hash(const std::string& family);  // throws for an unknown family

// The canonical JSON of the spec's problem parameters only (the family's params with
// is_config false), e.g. {"format":"e4m3","granularity":"1x128","input":"bf16","transpose":0}.
// Config parameters, if present, are ignored, so a problem-only spec works too. Throws
// Error(invalid_argument) for an unknown family or a missing or disallowed problem parameter.
std::string problem_key(const KernelSpec& spec);

// The key of a grouped (contiguous or masked layout) gemm row: problem_key(spec) with the group
// count as one more item, "groups": G. The count is part of the problem because the persistent
// grid spreads groups x tiles over the SMs: 8 groups of 512 rows and 32 of 128 want different
// tiles. Dense keys never hold it, so rows tuned before grouped rows existed keep their keys.
// Throws Error(invalid_argument) for a dense spec or groups outside [1, 2^31-1].
std::string grouped_problem_key(const KernelSpec& spec, std::int64_t groups);

struct CandidateResult;  // fp8jit/tuning.hpp

// The `timings` column: a JSON array with one {config (spec object), status ("passed",
// "incorrect", "compile_failed", "launch_failed", "not_supported"), median_us, p20_us, p80_us
// (null where nothing was timed), error} per candidate, in the order tried.
std::string timings_to_json(const std::vector<CandidateResult>& candidates);

struct TuningRecord {
  GpuKey gpu;
  std::string op;           // the kernel family of `best`: "quantize", "dequantize", "gemm"
  std::string problem_key;  // problem_key(best); grouped gemms: grouped_problem_key(best, groups)
  // The tuned shape (>= 0; unused dimensions are 0); grouped gemms: m is the expected rows per
  // group (GroupedGemmArgs::expected_m).
  std::int64_t m = 0, n = 0, k = 0;
  std::string space_hash;            // identifies the candidate set; no control bytes
  KernelSpec best;                   // the fastest correct config
  double best_us = 0;                // its median time in microseconds (finite, > 0)
  std::string timings = "[]";        // timings_to_json(result.candidates)
  // Unix seconds, 0 to 253402300799 (the end of year 9999); put() fills in the current time for 0.
  std::int64_t created_at = 0;
  // The fp8jit release that tuned it ("unknown" for rows from before it was recorded): 1 to 64
  // letters, digits, '.', '-', '+' or '_'. put() fills in this library's version for "".
  std::string fp8jit_version;
  // The card that measured it (current_gpu_identity(): host, PCI bus id, UUID), so that a sweep
  // over several GPUs or hosts says where each row came from; "unknown" for rows from before it
  // was recorded and for rows put() without one. 1 to 256 bytes, no control bytes.
  std::string tuned_on;
};

// The rows of an `fp8jit db export` document, every one validated as put() would (see
// TuningDb::import_json), without a database. Throws Error(invalid_argument) naming the row and
// the reason, or the document's format or version.
std::vector<TuningRecord> parse_tuning_export(std::string_view json);

struct ImportStats {
  std::size_t inserted = 0;  // rows for keys the database did not have
  std::size_t replaced = 0;  // rows that were faster than (or replaced an invalid) stored row
  std::size_t kept = 0;      // rows not written: the stored row was at least as fast
};

struct RebuildStats {
  bool healthy = false;          // the file was a healthy database and was left exactly as it was
  std::size_t rows = 0;          // rows in the database now
  std::string moved_to;          // where the damaged file went; empty when nothing moved
  std::size_t rows_read = 0;     // rows that could still be read from the old file
  std::size_t rows_copied = 0;   // of those, rows that validate and are in the new file
  std::size_t rows_dropped = 0;  // rows read but invalid (bad config, bad fields)
};

class TuningDb {
 public:
  static constexpr int kSchemaVersion = 4;

  // Opens or creates the database (and its parent directories) and migrates an older schema
  // (version 2 to 3 re-keys rows of the current config spaces to today's space hash; 3 to 4 adds
  // tuned_on, "unknown" for the rows it finds).
  // Throws Error(io) for a path that cannot be a database, for someone else's file, for a
  // damaged file and while a rebuild of the file does not finish within 10 s.
  explicit TuningDb(const std::string& path);
  ~TuningDb();
  TuningDb(TuningDb&& other) noexcept;
  TuningDb& operator=(TuningDb&& other) noexcept;
  TuningDb(const TuningDb&) = delete;
  TuningDb& operator=(const TuningDb&) = delete;

  const std::string& path() const { return path_; }
  int schema_version() const;

  // Stores `r` unless a valid row for the same key is at least as fast: a row is replaced only
  // by a strictly faster result, or when the stored row no longer validates (e.g. the config
  // space changed). Returns true when it wrote. Throws Error(invalid_argument) for a record
  // that does not validate (see the top of this file), Error(io) for database trouble.
  bool put(const TuningRecord& r);

  std::optional<TuningRecord> get_exact(const GpuKey& gpu, std::string_view op,
                                        std::string_view problem_key, std::int64_t m,
                                        std::int64_t n, std::int64_t k,
                                        std::string_view space_hash);
  // Same GPU, op, problem, n, k and space: the valid row whose M is closest to m (ties: the
  // larger M, whose tiles are less likely to be too small). nullopt when there is none.
  std::optional<TuningRecord> get_nearest_m(const GpuKey& gpu, std::string_view op,
                                            std::string_view problem_key, std::int64_t m,
                                            std::int64_t n, std::int64_t k,
                                            std::string_view space_hash);

  // Valid rows (all GPUs, or only `gpu`), ordered by gpu, op, problem, n, k, m, space.
  std::vector<TuningRecord> list(const std::optional<GpuKey>& gpu = std::nullopt);
  // Every row, valid or not.
  std::size_t row_count();

  // Deletes rows that no longer validate and, for every op in `space_hash_by_op`, rows of that
  // op tuned over another space. Returns how many rows were deleted. An empty space hash (or one
  // with control bytes, which no row can have) would delete all of that op's rows: it throws
  // Error(invalid_argument) and deletes nothing.
  std::size_t prune(const std::map<std::string, std::string>& space_hash_by_op = {});

  // {"format": "fp8jit-tuning", "version": 3, "rows": [...]}: every valid row, in list() order,
  // each with its fp8jit_version and tuned_on.
  std::string export_json();
  // Merges an export into this database, faster entry wins (as put()). Reads version 3 and the
  // versions 2 and 1 of earlier releases (rows without tuned_on or fp8jit_version: "unknown"; rows keyed by the
  // space hash of earlier releases are re-keyed as migration 3 does); any other version is
  // refused. All or nothing: the document is validated by parse_tuning_export() before one
  // transaction merges it; malformed JSON or any invalid row throws Error(invalid_argument)
  // naming the row and the reason, and nothing is written.
  ImportStats import_json(std::string_view json);
  // import_json() into the database at `path`, which is opened (or created) only once the whole
  // document has validated: a refused document leaves no file behind.
  static ImportStats import_into(const std::string& path, std::string_view json);

  // Checks the database under the writers' lock (BEGIN IMMEDIATE) and, when it is healthy,
  // changes nothing and says so (healthy, rows). A damaged one is recovered: `path` (and its
  // -wal) moves aside to `path.corrupt-<UTC time>`, a fresh database is created at `path` and
  // every row that can still be read and validates is copied over. That needs the file to
  // itself: while any other connection (in any process) has it open, it throws Error(io)
  // "tuning database PATH is in use by another process; ..." and changes nothing. A missing
  // file is created empty. Another program's file is refused as by the constructor.
  static RebuildStats rebuild(const std::string& path);

  // Whether anything (a file of any kind, even a dangling link) is at `path`, so that commands
  // that only read can say there is no database yet instead of creating one.
  static bool exists(const std::string& path);

 private:
  // held_by_caller: rebuild holds PATH.lock exclusively already, so that no other process can
  // open the file between the move and the end of the copy.
  enum class LockMode { shared, held_by_caller };
  TuningDb(const std::string& path, LockMode lock);
  static RebuildStats salvage_into_fresh(const std::string& path);
  ImportStats merge_all(const std::vector<TuningRecord>& records);  // validated ones
  void close() noexcept;  // the connection first, then the lock

  std::string path_;
  sqlite3* db_ = nullptr;
  int lock_fd_ = -1;  // holds the shared lock on PATH.lock; -1 under LockMode::held_by_caller
};

}  // namespace fp8jit
