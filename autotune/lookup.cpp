#include "autotune/lookup.hpp"

#include <filesystem>
#include <map>
#include <memory>

#include "autotune/tuning_db.hpp"
#include "generator/family.hpp"
#include "common/file_io.hpp"
#include "common/log.hpp"

namespace fp8jit {

std::string_view to_string(LookupSource s) {
  switch (s) {
    case LookupSource::exact: return "database";
    case LookupSource::nearest_m: return "database (nearest M)";
    case LookupSource::heuristic: return "heuristic";
  }
  return "?";
}

namespace {

// One connection per thread and path: TuningDb is not thread-safe, and opening it costs a
// quick_check, so it is kept.
TuningDb* thread_db(const std::string& path) {
  thread_local std::map<std::string, std::unique_ptr<TuningDb>> dbs;
  auto it = dbs.find(path);
  if (it == dbs.end()) it = dbs.emplace(path, std::make_unique<TuningDb>(path)).first;
  return it->second.get();
}

}  // namespace

GemmLookup lookup_gemm(const GemmProblem& problem, std::int64_t m, std::int64_t n, std::int64_t k,
                       const std::string& db_path, TunePolicy policy, const GpuKey& gpu, int smem_bytes) {
  GemmLookup out{default_gemm_spec(problem, m, n, k, gpu.sm_count, smem_bytes), LookupSource::heuristic};
  if (policy == TunePolicy::off || db_path.empty()) return out;
  // NOTE: a lookup never creates the database: a serving process that nobody tuned for should
  // not leave an empty SQLite file behind (tune and import create it).
  std::error_code ec;
  if (!std::filesystem::exists(db_path, ec)) return out;
  // SQLite would open a FIFO and block reading it; anything but a file cannot be a database.
  if (const std::string kind = special_file_kind(db_path); !kind.empty()) {
    log::at(log::warning, "tuning database {} is {}, not a file; falling back to the heuristic", printable(db_path),
            kind);
    return out;
  }
  try {
    TuningDb* db = thread_db(db_path);
    const std::string key = problem_key(out.spec), space = tuning_space_hash("gemm");
    if (auto row = db->get_exact(gpu, "gemm", key, m, n, k, space)) return {row->best, LookupSource::exact};
    if (auto row = db->get_nearest_m(gpu, "gemm", key, m, n, k, space)) return {row->best, LookupSource::nearest_m};
  } catch (const std::exception& e) {
    log::at(log::warning, "tuning database not used ({}); falling back to the heuristic", e.what());
  }
  return out;
}

bool store_gemm_result(const std::string& db_path, const GpuKey& gpu, const GemmShape& shape, const TuneResult& r) {
  if (!r.best || db_path.empty()) return false;
  const CandidateResult& best = r.candidates[*r.best];
  TuningRecord rec;
  rec.gpu = gpu;
  rec.op = "gemm";
  rec.problem_key = problem_key(best.spec);
  rec.m = shape.m;
  rec.n = shape.n;
  rec.k = shape.k;
  rec.space_hash = tuning_space_hash("gemm");
  rec.best = best.spec;
  rec.best_us = best.timing.median_us;
  rec.timings = timings_to_json(r.candidates);
  thread_db(db_path)->put(rec);
  return true;
}

}  // namespace fp8jit
