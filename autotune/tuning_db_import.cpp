// `fp8jit db export` documents: writing one, and reading one back. A document is validated as a
// whole (every row by the rules of put()) before any database is opened, let alone created.
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <nlohmann/json.hpp>
#include <utility>

#include "autotune/tuning_db.hpp"
#include "autotune/tuning_db_internal.hpp"
#include "fp8jit/error.hpp"

namespace fp8jit {

using namespace tuning_db_detail;
using nlohmann::json;

namespace {

// Export versions: 1 from releases before fp8jit_version was recorded, 2 with it, 3 with
// tuned_on. A later version may carry fields or meanings this build does not know: refused,
// never half-read.
constexpr int kExportVersion = 3;

// A row of a version-`version` document, named rows[i] in every error.
TuningRecord parse_import_row(const json& row, std::size_t i, int version) {
  const std::string at = fmt::format("rows[{}]", i);
  if (!row.is_object()) invalid(fmt::format("{}: expected an object, got {}", at, row.type_name()));
  static const std::vector<std::string> kFields = {
      "gpu",        "op",          "problem_key",
      "m",          "n",           "k",
      "space_hash", "best_config", "best_us",
      "timings",    "created_at",  "fp8jit_version", "tuned_on"};  // from versions 2 and 3 on
  const auto known_end = kFields.end() - (version >= 3 ? 0 : version == 2 ? 1 : 2);
  for (const auto& [key, _] : row.items())
    if (std::find(kFields.begin(), known_end, key) == known_end)
      invalid(fmt::format("{}: unknown field \"{}\"", at, brief(key)));
  const auto get = [&](const char* name, bool (json::*is)() const noexcept,
                       const char* what) -> const json& {
    if (!row.contains(name)) invalid(fmt::format("{}: missing field \"{}\"", at, name));
    const json& v = row[name];
    if (!(v.*is)() || (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(INT64_MAX)))
      invalid(fmt::format("{}.{}: expected {}, got {}", at, name, what, brief(v.dump(), 40)));
    return v;
  };
  const auto str = [&](const char* name) {
    return get(name, &json::is_string, "a string").get<std::string>();
  };
  const auto integer = [&](const char* n) {
    return get(n, &json::is_number_integer, "an integer").get<std::int64_t>();
  };
  TuningRecord r;
  try {  // library errors (gpu key, spec) do not know the row: name it
    r.gpu = GpuKey::from_string(str("gpu"));
    r.best = spec_from_json(get("best_config", &json::is_object, "a spec object").dump());
  } catch (const Error& e) {
    if (std::string_view(e.what()).rfind(at, 0) == 0) throw;
    invalid(at + ": " + e.what());
  }
  r.op = str("op"), r.problem_key = str("problem_key");
  r.space_hash = upgraded_space_hash(r.op, str("space_hash"));  // version 1's may be legacy
  r.fp8jit_version = version >= 2 ? str("fp8jit_version") : "unknown";
  r.tuned_on = version >= 3 ? str("tuned_on") : "unknown";
  r.m = integer("m"), r.n = integer("n"), r.k = integer("k"), r.created_at = integer("created_at");
  r.best_us = get("best_us", &json::is_number, "a number").get<double>();
  r.timings = get("timings", &json::is_array, "an array").dump();
  if (std::string why = record_problem(r); !why.empty()) invalid(at + ": " + why);
  return r;
}

// The document's version, when it is one this build reads. An integer only: 2.0 or "2" is not
// what any fp8jit writes.
int export_version(const json& doc) {
  const json v = doc.value("version", json());
  if (!v.is_number_integer() || v < 1 || v > kExportVersion)
    invalid(fmt::format(
        "import: export version {} is not one of 1 to {}, the versions this fp8jit reads; import "
        "it with an fp8jit as new as the one that exported it",
        brief(v.dump(), 20), kExportVersion));
  return v.get<int>();
}

}  // namespace

std::vector<TuningRecord> parse_tuning_export(std::string_view text) {
  const json doc = parse_json(text, 12, "import");
  if (!doc.is_object())
    invalid(fmt::format("import: expected a JSON object, got {}", doc.type_name()));
  if (doc.value("format", json()) != "fp8jit-tuning")
    invalid("import: \"format\" is not \"fp8jit-tuning\" (not an `fp8jit db export` file)");
  const int version = export_version(doc);
  if (!doc.contains("rows") || !doc["rows"].is_array())
    invalid("import: \"rows\" must be an array");
  std::vector<TuningRecord> records;
  for (std::size_t i = 0; i < doc["rows"].size(); ++i)
    records.push_back(parse_import_row(doc["rows"][i], i, version));
  return records;
}

std::string TuningDb::export_json() {
  using ojson = nlohmann::ordered_json;
  ojson rows = ojson::array();
  for (const TuningRecord& r : list())
    rows.push_back({{"gpu", r.gpu.str()},
                    {"op", r.op},
                    {"problem_key", r.problem_key},
                    {"m", r.m},
                    {"n", r.n},
                    {"k", r.k},
                    {"space_hash", r.space_hash},
                    {"best_config", ojson::parse(spec_to_json(r.best))},
                    {"best_us", r.best_us},
                    {"timings", ojson::parse(r.timings)},
                    {"created_at", r.created_at},
                    {"fp8jit_version", r.fp8jit_version},
                    {"tuned_on", r.tuned_on}});
  return ojson{{"format", "fp8jit-tuning"}, {"version", kExportVersion}, {"rows", std::move(rows)}}
             .dump(2) +
         "\n";
}

ImportStats TuningDb::import_json(std::string_view text) {
  return merge_all(parse_tuning_export(text));  // a bad row throws before the transaction
}

ImportStats TuningDb::import_into(const std::string& path, std::string_view text) {
  const std::vector<TuningRecord> records = parse_tuning_export(text);  // before the file exists
  return TuningDb(path).merge_all(records);
}

ImportStats TuningDb::merge_all(const std::vector<TuningRecord>& records) {
  ImportStats stats;
  WriteTxn txn(db_, path_);
  for (const TuningRecord& r : records) {
    const Merge kind = merge_row(db_, path_, r);
    ++(kind == Merge::inserted   ? stats.inserted
       : kind == Merge::replaced ? stats.replaced
                                 : stats.kept);
  }
  txn.commit();
  return stats;
}

}  // namespace fp8jit
