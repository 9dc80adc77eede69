// Tuned rows shipped with fp8jit: `fp8jit db export` documents (*.json) installed read-only under
// <prefix>/share/fp8jit/tuning (a source tree's share/fp8jit/tuning beside its build), tuned on
// the GPUs the project measures. A lookup consults them after the user's tuning database and
// before the heuristic, so a GPU that nobody tuned for locally still gets tuned configs.
//
// Read once per directory and process, and never written. A document that does not parse or
// validate (as `fp8jit db import` would check it) is skipped with a warning naming the file; a
// missing or empty directory has no rows. Rows are matched exactly as the database's are: same
// GPU key, op, problem key, N, K and config space (tuning_space_hash), M exact or else nearest
// (ties: the larger M).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "autotune/tuning_db.hpp"
#include "fp8jit/tuning.hpp"  // default_shipped_tuning_dir

namespace fp8jit {

struct ShippedRow {
  TuningRecord record;
  std::string file;  // the document it came from (its file name)
};

class ShippedRows {
 public:
  // The rows of every *.json under `dir`, read on the first call for that directory.
  static const ShippedRows& at(const std::string& dir);
  // Reads `dir` now (tests, `fp8jit db list`).
  static ShippedRows read(const std::string& dir);

  const std::vector<ShippedRow>& rows() const { return rows_; }
  const std::string& dir() const { return dir_; }

  const ShippedRow* exact(const GpuKey& gpu, std::string_view op, std::string_view problem_key,
                          std::int64_t m, std::int64_t n, std::int64_t k,
                          std::string_view space_hash) const;
  const ShippedRow* nearest_m(const GpuKey& gpu, std::string_view op, std::string_view problem_key,
                              std::int64_t m, std::int64_t n, std::int64_t k,
                              std::string_view space_hash) const;

 private:
  std::string dir_;
  std::vector<ShippedRow> rows_;
};

}  // namespace fp8jit
