#include "autotune/lookup.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>

#include "autotune/shipped_rows.hpp"
#include "autotune/tuning_db.hpp"
#include "common/file_io.hpp"
#include "common/log.hpp"
#include "generator/family.hpp"
#include "generator/gemm_cost.hpp"

namespace fp8jit {

std::string_view to_string(LookupSource s) {
  switch (s) {
    case LookupSource::exact: return "database";
    case LookupSource::nearest_m: return "database (nearest M)";
    case LookupSource::shipped:
      return "shipped tuning rows";
    case LookupSource::shipped_nearest_m:
      return "shipped tuning rows (nearest M)";
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

namespace {

// The shape a lookup is for, to judge a row tuned for another M against the heuristic's choice.
struct Wanted {
  const GemmProblem& problem;
  std::int64_t m, n, k;
  int sm_count;
};

// A row tuned for another M stands in only where it swaps the operands as the heuristic does at
// this M, and with tiles as tall: a swapped decode tile tuned at M = 1 (64x8) would cut M = 1000
// into 125 column tiles, and an unswapped one tuned at M = 4096 would give up the swap's 4-29 %
// at M = 8 (G64); a 64-row decode tile tuned at M = 128 (64x32, one wave without split-K) ran
// 4096x2112x7168 in 255.6 µs against 102.6 for the 4096-row tiles (H200, G66).
// And only where the row's tiles along M number at most 1.5x as many, or as few, as at the M it
// was tuned at, and (dense GEMMs) where the cost model rates it at this M within 5 % of the
// heuristic's config: a tile's width and depth win for the waves they make at the M they were
// timed at. On DeepSeek-V3's N and K at M = 256, 1024, 2048 and 6144
// (bench/shapes/deepseek_v3_other_m.csv, H100, rows tuned at M = 64, 128 and 4096; kernel times)
// the rows taken on tile height alone ran 0.935x (block) and 0.902x (per tensor) the heuristic's
// speed: 128x64 tuned at M = 128 took 1024x7168x16384 from 195.1 to 333.3 µs and 1024x7168x2048
// (model cost 0.99x) from 31.1 to 38.6; 6144x2112x7168 per tensor lost 17 % to the M = 4096 row
// (model cost 1.17x). With the tile count and 10 %: 1.001x and 0.995x, the one loss 128x208 at
// 6144x4096x7168 per tensor (model cost 1.07x; 266.5 -> 338.7 µs, where the run before had it
// 3 % ahead), which 5 % leaves out.
constexpr std::int64_t kStandInTilesNum = 3, kStandInTilesDen = 2;
constexpr double kStandInMaxCostRatio = 1.05;

bool stands_in(const KernelSpec& row, std::int64_t row_m, const GemmLookup& fallback,
               const Wanted& w) {
  const GemmConfig r = gemm_config_of(row), h = gemm_config_of(fallback.spec);
  if (r.swap_ab != h.swap_ab || r.block_m != h.block_m) return false;
  // Swapped tiles hold M along their columns.
  const std::int64_t along_m = r.swap_ab ? r.block_n : r.block_m;
  const std::int64_t tuned = (row_m + along_m - 1) / along_m, now = (w.m + along_m - 1) / along_m;
  const std::int64_t lo = std::min(tuned, now), hi = std::max(tuned, now);
  if (lo < 1 || hi * kStandInTilesDen > lo * kStandInTilesNum) return false;
  if (w.problem.layout != GemmLayout::dense) return true;  // the model costs dense launches only
  auto cost = [&](const GemmConfig& c) {
    return gemm_cost(w.problem, c, w.m, w.n, w.k, w.sm_count,
                     gemm_split_k(w.m, w.n, w.k, c, w.sm_count));
  };
  return cost(r) <= kStandInMaxCostRatio * cost(h);
}

// The database part of a lookup: `fallback` (the heuristic's spec) unless the database has a row
// under `key` for this shape, or for the nearest M of the same (key, n, k).
GemmLookup user_rows(const GemmLookup& fallback, const std::string& key, const Wanted& w,
                     const std::string& db_path, TunePolicy policy, const GpuKey& gpu) {
  const std::int64_t m = w.m, n = w.n, k = w.k;
  if (policy == TunePolicy::off || db_path.empty()) return fallback;
  // NOTE: a lookup never creates the database: a serving process that nobody tuned for should
  // not leave an empty SQLite file behind (tune and import create it).
  std::error_code ec;
  if (!std::filesystem::exists(db_path, ec)) return fallback;
  // SQLite would open a FIFO and block reading it; anything but a file cannot be a database.
  if (const std::string kind = special_file_kind(db_path); !kind.empty()) {
    log::at(log::warning, "tuning database {} is {}, not a file; falling back to the heuristic", printable(db_path),
            kind);
    return fallback;
  }
  try {
    TuningDb* db = thread_db(db_path);
    const std::string space = tuning_space_hash("gemm");
    if (auto row = db->get_exact(gpu, "gemm", key, m, n, k, space)) return {row->best, LookupSource::exact};
    if (auto row = db->get_nearest_m(gpu, "gemm", key, m, n, k, space);
        row && stands_in(row->best, row->m, fallback, w))
      return {row->best, LookupSource::nearest_m};
  } catch (const std::exception& e) {
    log::at(log::warning, "tuning database not used ({}); falling back to the heuristic", e.what());
  }
  return fallback;
}

// The user's database first (their own measurements), then the shipped rows, then `fallback`.
GemmLookup lookup_rows(const GemmLookup& fallback, const std::string& key, const Wanted& w,
                       const std::string& db_path, TunePolicy policy, const GpuKey& gpu,
                       const std::string& shipped_dir) {
  const std::int64_t m = w.m, n = w.n, k = w.k;
  const GemmLookup user = user_rows(fallback, key, w, db_path, policy, gpu);
  if (user.source != LookupSource::heuristic || policy == TunePolicy::off || shipped_dir.empty())
    return user;
  const ShippedRows& shipped = ShippedRows::at(shipped_dir);
  const std::string space = tuning_space_hash("gemm");
  if (const ShippedRow* r = shipped.exact(gpu, "gemm", key, m, n, k, space))
    return {r->record.best, LookupSource::shipped};
  if (const ShippedRow* r = shipped.nearest_m(gpu, "gemm", key, m, n, k, space);
      r && stands_in(r->record.best, r->record.m, fallback, w))
    return {r->record.best, LookupSource::shipped_nearest_m};
  return fallback;
}

bool store_row(const std::string& db_path, const GpuKey& gpu, const std::string& tuned_on,
               const std::string& key, const GemmShape& shape, const TuneResult& r) {
  if (!r.best || db_path.empty()) return false;
  const CandidateResult& best = r.candidates[*r.best];
  TuningRecord rec;
  rec.gpu = gpu;
  rec.op = "gemm";
  rec.problem_key = key;
  rec.m = shape.m;
  rec.n = shape.n;
  rec.k = shape.k;
  rec.space_hash = tuning_space_hash("gemm");
  rec.best = best.spec;
  rec.best_us = best.timing.median_us;
  rec.timings = timings_to_json(r.candidates);
  rec.tuned_on = tuned_on;
  thread_db(db_path)->put(rec);
  return true;
}

}  // namespace

GemmLookup lookup_gemm(const GemmProblem& problem, std::int64_t m, std::int64_t n, std::int64_t k,
                       const std::string& db_path, TunePolicy policy, const GpuKey& gpu,
                       int smem_bytes, const std::string& shipped_dir) {
  const GemmLookup heuristic{default_gemm_spec(problem, m, n, k, gpu.sm_count, smem_bytes),
                             LookupSource::heuristic};
  return lookup_rows(heuristic, problem_key(heuristic.spec), Wanted{problem, m, n, k, gpu.sm_count},
                     db_path, policy, gpu, shipped_dir);
}

GemmLookup lookup_grouped_gemm(const GemmProblem& problem, std::int64_t groups,
                               std::int64_t expected_m, std::int64_t n, std::int64_t k,
                               const std::string& db_path, TunePolicy policy, const GpuKey& gpu,
                               int smem_bytes, const std::string& shipped_dir) {
  const GemmLookup heuristic{
      default_grouped_gemm_spec(problem, groups, expected_m, n, k, gpu.sm_count, smem_bytes),
      LookupSource::heuristic};
  return lookup_rows(heuristic, grouped_problem_key(heuristic.spec, groups),
                     Wanted{problem, expected_m, n, k, gpu.sm_count}, db_path, policy, gpu,
                     shipped_dir);
}

bool store_gemm_result(const std::string& db_path, const GpuKey& gpu, const std::string& tuned_on,
                       const GemmShape& shape, const TuneResult& r) {
  return r.best && store_row(db_path, gpu, tuned_on, problem_key(r.candidates[*r.best].spec), shape, r);
}

bool store_grouped_gemm_result(const std::string& db_path, const GpuKey& gpu, const std::string& tuned_on,
                               std::int64_t groups, const GemmShape& shape, const TuneResult& r) {
  return r.best &&
         store_row(db_path, gpu, tuned_on, grouped_problem_key(r.candidates[*r.best].spec, groups), shape, r);
}

}  // namespace fp8jit
