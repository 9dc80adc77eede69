// `fp8jit db`: inspect and maintain the tuning database (FP8JIT_DB). Needs no GPU.
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>

#include "autotune/shipped_rows.hpp"
#include "autotune/tuning_db.hpp"
#include "common/file_io.hpp"
#include "common/settings.hpp"
#include "fp8jit/error.hpp"
#include "fp8jit/runtime.hpp"
#include "tools/cli.hpp"
#include "tools/options.hpp"

namespace fp8jit::cli {
namespace {

// A time stamp from the file may be anything: one that is no calendar date is shown as a number.
std::string when(std::int64_t unix_seconds) {
  try {
    return fmt::format("{:%Y-%m-%d %H:%M:%S}Z", fmt::gmtime(static_cast<std::time_t>(unix_seconds)));
  } catch (const std::exception&) {
    return fmt::format("@{}", unix_seconds);
  }
}

// The spec's procedural name, or its JSON where it does not validate (a timing of a config from
// an older config space is still worth showing).
std::string config_label(const nlohmann::json& config) {
  try {
    return spec_name(spec_from_json(config.dump()));
  } catch (const Error&) {
    return config.dump();
  }
}

std::string us_or_dash(const nlohmann::json& v) { return v.is_number() ? fmt::format("{:.2f}", v.get<double>()) : "-"; }

struct DbOptions {
  std::string db, file, gpu, op, space_hash;
  std::int64_t m = -1, n = -1, k = -1;  // -1: any
};

std::optional<GpuKey> gpu_filter(const DbOptions& o) {
  if (o.gpu.empty()) return std::nullopt;
  return GpuKey::from_string(o.gpu);
}

std::string db_path(const DbOptions& o) { return o.db.empty() ? Settings::get().db_path : o.db; }

// Commands that only read never create the database: a missing file is reported, not made.
bool missing(const std::string& path, const char* what) {
  if (TuningDb::exists(path)) return false;
  fmt::print("no tuning database at {} yet: {}\n", printable(path), what);
  return true;
}

void print_rows(const std::vector<std::pair<const TuningRecord*, std::string>>& rows) {
  fmt::print("{:<24} {:<10} {:>7} {:>7} {:>7} {:>10}  {:<44} {:<20} {:<10} {:<24} {}\n", "gpu",
             "op", "m", "n", "k", "best_us", "config", "tuned", "by fp8jit", "on", "from");
  for (const auto& [r, from] : rows)
    fmt::print("{:<24} {:<10} {:>7} {:>7} {:>7} {:>10.2f}  {:<44} {:<20} {:<10} {:<24} {}\n",
               printable(r->gpu.str()), r->op, r->m, r->n, r->k, r->best_us, spec_name(r->best),
               when(r->created_at), printable(r->fp8jit_version), printable(r->tuned_on),
               printable(from));
}

// The user's database, then the rows shipped with fp8jit, each row saying which it came from (a
// lookup takes the user's first).
int db_list(const DbOptions& o) {
  const auto gpu = gpu_filter(o);
  const std::string path = db_path(o);
  std::vector<TuningRecord> user;
  std::size_t total = 0;
  if (!missing(path, "nothing tuned")) {
    TuningDb db(path);
    user = db.list(gpu);
    total = db.row_count();
    if (user.empty()) fmt::print("no valid tuning results in {}\n", printable(db.path()));
  }
  const std::string shipped_dir = RuntimeOptions::from_settings().shipped_tuning_dir;
  const ShippedRows shipped = ShippedRows::read(shipped_dir);
  std::vector<std::pair<const TuningRecord*, std::string>> rows;
  for (const TuningRecord& r : user) rows.push_back({&r, "database"});
  for (const ShippedRow& r : shipped.rows())
    if (!gpu || r.record.gpu == *gpu) rows.push_back({&r.record, "shipped: " + r.file});
  if (!rows.empty()) print_rows(rows);
  if (!gpu && total > user.size())
    fmt::print("{} invalid rows ignored: `fp8jit db prune --db {}` removes them\n",
               total - user.size(), printable(path));
  if (shipped.rows().empty())
    fmt::print("no shipped tuning rows{}\n", shipped_dir.empty()
                                                 ? " (FP8JIT_SHIPPED_TUNING=off)"
                                                 : fmt::format(" in {}", printable(shipped_dir)));
  return 0;
}

int db_show(const DbOptions& o) {
  const auto gpu = gpu_filter(o);
  const std::string path = db_path(o);
  if (missing(path, "nothing tuned")) return 0;
  TuningDb db(path);
  std::size_t shown = 0;
  for (const TuningRecord& r : db.list(gpu)) {
    if ((!o.op.empty() && o.op != r.op) || (o.m >= 0 && o.m != r.m) || (o.n >= 0 && o.n != r.n) ||
        (o.k >= 0 && o.k != r.k))
      continue;
    fmt::print("{}{} m={} n={} k={} on {} (tuned {} on {} by fp8jit {}, space {})\n", shown++ ? "\n" : "", r.op, r.m,
               r.n, r.k, printable(r.gpu.str()), when(r.created_at), printable(r.tuned_on), printable(r.fp8jit_version),
               printable(r.space_hash));
    fmt::print("  problem: {}\n  best:    {} {:.2f} us\n           {}\n", r.problem_key, spec_name(r.best), r.best_us,
               spec_to_json(r.best));
    const nlohmann::json timings = nlohmann::json::parse(r.timings);  // validated by the database
    fmt::print("  {} candidates:\n  {:<15} {:>10} {:>10} {:>10}  {:<44} {}\n", timings.size(), "status", "median_us",
               "p20_us", "p80_us", "config", "error");
    for (const nlohmann::json& t : timings)
      fmt::print("  {:<15} {:>10} {:>10} {:>10}  {:<44} {}\n", t["status"].get<std::string>(),
                 us_or_dash(t.value("median_us", nlohmann::json())), us_or_dash(t.value("p20_us", nlohmann::json())),
                 us_or_dash(t.value("p80_us", nlohmann::json())), config_label(t["config"]), printable(t.value("error", "")));
  }
  if (shown == 0) fmt::print("no matching tuning results in {}\n", printable(db.path()));
  return 0;
}

int db_export(const DbOptions& o) {
  const std::string path = db_path(o);
  if (!TuningDb::exists(path)) throw Error(ErrorKind::io, fmt::format("no tuning database at {}: nothing to export", path));
  const std::string text = TuningDb(path).export_json();
  if (o.file.empty()) {
    fmt::print("{}", text);
    return 0;
  }
  OutputFiles outputs;
  outputs.add(o.file, text);
  outputs.commit();
  fmt::print(stderr, "exported {} rows to {}\n", nlohmann::json::parse(text)["rows"].size(), printable(o.file));
  return 0;
}

int db_import(const DbOptions& o) {
  const std::string text = read_regular_file(o.file, "--file", std::size_t{1} << 30);
  const std::string path = db_path(o);
  const ImportStats s = TuningDb::import_into(path, text);  // a refused file creates nothing
  fmt::print("imported {} rows into {}: {} new, {} replaced (faster), {} kept (stored row as fast or faster)\n",
             s.inserted + s.replaced + s.kept, printable(path), s.inserted, s.replaced, s.kept);
  return 0;
}

int db_prune(const DbOptions& o) {
  std::map<std::string, std::string> spaces;
  if (!o.op.empty()) spaces[o.op] = o.space_hash;  // the options need each other
  const std::string path = db_path(o);
  if (missing(path, "nothing to prune")) return 0;
  fmt::print("removed {} rows from {}\n", TuningDb(path).prune(spaces), printable(path));
  return 0;
}

int db_rebuild(const DbOptions& o) {
  const std::string path = db_path(o);
  if (missing(path, "nothing to rebuild")) return 0;
  const RebuildStats s = TuningDb::rebuild(path);
  if (s.healthy) {
    fmt::print("{} is healthy ({} rows): nothing changed\n", printable(path), s.rows);
    return 0;
  }
  if (!s.moved_to.empty()) fmt::print("moved the damaged file to {}\n", printable(s.moved_to));
  fmt::print("rebuilt {}: {} rows read, {} copied, {} dropped (invalid)\n", printable(path), s.rows_read, s.rows_copied,
             s.rows_dropped);
  return 0;
}

}  // namespace

void add_db_command(CLI::App& app) {
  auto* db = app.add_subcommand("db", "the tuning database (FP8JIT_DB): list, show, export, import, prune, rebuild");
  db->require_subcommand(1, 1);
  auto add = [db](const char* name, const char* doc, int (*fn)(const DbOptions&)) {
    auto* sub = db->add_subcommand(name, doc);
    auto o = std::make_shared<DbOptions>();
    sub->add_option("--db", o->db, "the database file (default: FP8JIT_DB)");
    on_run(sub, [o, fn] { return fn(*o); });
    return std::make_pair(sub, o);
  };
  auto [list, lo] = add("list", "one line per valid row", db_list);
  list->add_option("--gpu", lo->gpu, "only rows of this GPU key");

  auto [show, so] = add("show", "rows with every candidate's timing", db_show);
  show->add_option("--gpu", so->gpu, "only rows of this GPU key");
  show->add_option("--op", so->op, "only rows of this operation")->check(CLI::IsMember({"gemm", "quantize", "dequantize"}));
  for (auto [flag, var] : {std::pair{"--m", &so->m}, {"--n", &so->n}, {"--k", &so->k}})
    show->add_option(flag, *var, "only rows of this size")->check(integer_in(0, INT64_MAX));

  auto [exp, eo] = add("export", "every valid row as JSON (to stdout, or --file)", db_export);
  exp->add_option("--file", eo->file, "write the export here (replaced only when complete)");

  auto [imp, io] = add("import", "merge an export; the faster row wins", db_import);
  imp->add_option("--file", io->file, "an `fp8jit db export` file")->required();

  auto [prune, po] = add("prune", "remove rows that no longer validate (and, with --op, rows of another space)", db_prune);
  auto* op = prune->add_option("--op", po->op, "also remove this op's rows tuned over another space")
                 ->check(CLI::IsMember({"gemm", "quantize", "dequantize"}));
  auto* space = prune->add_option("--space-hash", po->space_hash, "the space whose rows of --op are kept")
                    ->check(CLI::Validator([](std::string& s) { return s.empty() ? std::string("must not be empty") : std::string(); },
                                           "NON-EMPTY"));
  op->needs(space);
  space->needs(op);

  add("rebuild", "recover a damaged database (a healthy one is left as it is)", db_rebuild);
}

}  // namespace fp8jit::cli
