// `fp8jit db`: inspect and maintain the tuning database (FP8JIT_DB). Needs no GPU.
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "autotune/tuning_db.hpp"
#include "fp8jit/error.hpp"
#include "runtime/settings.hpp"
#include "tools/cli.hpp"

namespace fp8jit::cli {
namespace {

std::string when(std::int64_t unix_seconds) {
  return fmt::format("{:%Y-%m-%d %H:%M:%S}Z", fmt::gmtime(static_cast<std::time_t>(unix_seconds)));
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

std::optional<GpuKey> gpu_filter(const Args& args) {
  if (auto g = args.get("gpu")) return GpuKey::from_string(*g);
  return std::nullopt;
}

int db_list(TuningDb& db, const Args& args) {
  const std::vector<TuningRecord> rows = db.list(gpu_filter(args));
  const std::size_t total = db.row_count();
  if (rows.empty()) fmt::print("no valid tuning results in {}\n", db.path());
  else
    fmt::print("{:<24} {:<10} {:>7} {:>7} {:>7} {:>10}  {:<44} {}\n", "gpu", "op", "m", "n", "k", "best_us", "config",
               "tuned");
  for (const TuningRecord& r : rows)
    fmt::print("{:<24} {:<10} {:>7} {:>7} {:>7} {:>10.2f}  {:<44} {}\n", r.gpu.str(), r.op, r.m, r.n, r.k, r.best_us,
               spec_name(r.best), when(r.created_at));
  if (!args.get("gpu") && total > rows.size())
    fmt::print("{} invalid rows ignored: `fp8jit db prune --db {}` removes them\n", total - rows.size(), db.path());
  return 0;
}

int db_show(TuningDb& db, const Args& args) {
  std::size_t shown = 0;
  for (const TuningRecord& r : db.list(gpu_filter(args))) {
    if ((args.get("op") && *args.get("op") != r.op) || (args.get("m") && args.get_int("m", 0) != r.m) ||
        (args.get("n") && args.get_int("n", 0) != r.n) || (args.get("k") && args.get_int("k", 0) != r.k))
      continue;
    fmt::print("{}{} m={} n={} k={} on {} (tuned {}, space {})\n", shown++ ? "\n" : "", r.op, r.m, r.n, r.k,
               r.gpu.str(), when(r.created_at), r.space_hash);
    fmt::print("  problem: {}\n  best:    {} {:.2f} us\n           {}\n", r.problem_key, spec_name(r.best), r.best_us,
               spec_to_json(r.best));
    const nlohmann::json timings = nlohmann::json::parse(r.timings);  // validated by the database
    fmt::print("  {} candidates:\n  {:<15} {:>10} {:>10} {:>10}  {:<44} {}\n", timings.size(), "status", "median_us",
               "p20_us", "p80_us", "config", "error");
    for (const nlohmann::json& t : timings)
      fmt::print("  {:<15} {:>10} {:>10} {:>10}  {:<44} {}\n", t["status"].get<std::string>(),
                 us_or_dash(t.value("median_us", nlohmann::json())), us_or_dash(t.value("p20_us", nlohmann::json())),
                 us_or_dash(t.value("p80_us", nlohmann::json())), config_label(t["config"]), t.value("error", ""));
  }
  if (shown == 0) fmt::print("no matching tuning results in {}\n", db.path());
  return 0;
}

}  // namespace

int cmd_db(int argc, char** argv) {
  const std::string sub = argc > 2 ? argv[2] : "";
  const std::vector<std::string> subs = {"list", "show", "export", "import", "prune", "rebuild"};
  if (std::find(subs.begin(), subs.end(), sub) == subs.end())
    throw_invalid("db subcommand", sub.empty() ? "<missing>" : sub, "one of list, show, export, import, prune, rebuild");
  const Args args(argc, argv, 3, {"db", "file", "gpu", "op", "m", "n", "k", "space-hash"}, {});
  const std::string path = args.get_or("db", Settings::get().db_path);

  if (sub == "rebuild") {  // before anything opens the (possibly damaged) file
    const RebuildStats s = TuningDb::rebuild(path);
    if (!s.moved_to.empty()) fmt::print("moved the old file to {}\n", s.moved_to);
    fmt::print("rebuilt {}: {} rows read, {} copied, {} dropped (invalid)\n", path, s.rows_read, s.rows_copied,
               s.rows_dropped);
    return 0;
  }
  TuningDb db(path);
  if (sub == "list") return db_list(db, args);
  if (sub == "show") return db_show(db, args);
  if (sub == "export") {
    const std::string text = db.export_json();
    const auto file = args.get("file");
    if (!file) {
      fmt::print("{}", text);
      return 0;
    }
    std::ofstream out(*file, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) throw Error(ErrorKind::io, fmt::format("--file {}: cannot write", *file));
    fmt::print(stderr, "exported {} rows to {}\n", nlohmann::json::parse(text)["rows"].size(), *file);
    return 0;
  }
  if (sub == "import") {
    const auto file = args.get("file");
    if (!file) throw_invalid("--file", "<missing>", "the export file to import");
    std::ifstream in(*file, std::ios::binary);
    if (!in) throw Error(ErrorKind::io, fmt::format("--file {}: cannot open it for reading", *file));
    std::stringstream text;
    text << in.rdbuf();  // an empty file reads as "" and fails as JSON
    const ImportStats s = db.import_json(text.str());
    fmt::print("imported {} rows into {}: {} new, {} replaced (faster), {} kept (stored row as fast or faster)\n",
               s.inserted + s.replaced + s.kept, path, s.inserted, s.replaced, s.kept);
    return 0;
  }
  // prune
  std::map<std::string, std::string> spaces;
  if (args.get("op") || args.get("space-hash")) {
    if (!args.get("op") || !args.get("space-hash"))
      throw_invalid("--op/--space-hash", "only one given", "give both: rows of OP tuned over another space are removed");
    spaces[*args.get("op")] = *args.get("space-hash");
  }
  fmt::print("removed {} rows from {}\n", db.prune(spaces), path);
  return 0;
}

}  // namespace fp8jit::cli
